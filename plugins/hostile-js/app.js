// hostile-js: a JavaScript skill that misbehaves on purpose.
import { skill, elicit, ask } from "./skillhost.js";

export const tools = skill({
  "hostile_js.spin": () => {
    let n = 0;
    for (;;) n++;
  },
  "hostile_js.alloc": () => {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  },
  "hostile_js.fetch": ({ url }) => {
    // StarlingMonkey's fetch is asynchronous; the host refuses the request
    // when it is sent, which a synchronous export observes as a rejected
    // promise after the call returns. What matters: nothing is reached.
    let outcome = "pending";
    try {
      fetch(url).then(
        () => { outcome = "fetched"; },
        (e) => { outcome = `refused: ${e}`; },
      );
    } catch (e) {
      outcome = `refused: ${e}`;
    }
    return { outcome };
  },
  "hostile_js.throw": () => {
    throw new TypeError("the skill's own bug");
  },
  "hostile_js.ok": () => ({ ok: true }),
  // No catch: a `denied` answer ends the call as `denied`.
  "hostile_js.ask": () => {
    const { action, content } = elicit("Which city?", {
      type: "object",
      properties: { city: { type: "string" } },
    });
    return { action, content: content === undefined ? null : content };
  },
  "hostile_js.ask_many": (args) => {
    const city = { type: "object", properties: { city: { type: "string" } } };
    const answers = ask([
      { key: args.key ?? "city", form: { message: "Which city?", schema: city } },
      { key: "country", form: { message: "Which country?", schema: city } },
    ]);
    return {
      answers: answers.map((a) => ("answered" in a ? ["answered", a.answered] : ["unavailable", a.unavailable])),
    };
  },
});
