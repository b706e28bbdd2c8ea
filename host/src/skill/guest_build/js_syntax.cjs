// skillhost build: where the syntax errors componentize-js counted are.
// Run by the Node.js that runs componentize-js, with the path of its
// program and the files to check; parses each with componentize-js's own
// parser (oxc-parser, resolved from componentize-js), as it does, and
// prints one JSON line per error: {"file", "line", "column", "message"}.
// Exits 0 whatever it finds; prints nothing when it cannot ask the parser.
"use strict";
const fs = require("node:fs");
const { createRequire } = require("node:module");

let oxc;
try {
  oxc = createRequire(fs.realpathSync(process.argv[2]))("oxc-parser");
} catch (_) {
  process.exit(0);
}
for (const file of process.argv.slice(3)) {
  let code;
  try {
    code = fs.readFileSync(file, "utf8");
  } catch (_) {
    continue;
  }
  const result = oxc.parseSync(file, code, { sourceType: "module" });
  for (const e of result.errors || []) {
    // The offset as the parser gives it, in UTF-16 units of the text.
    const at = (e.labels && e.labels[0] && e.labels[0].start) || 0;
    const before = code.slice(0, at);
    const line = before.split("\n").length;
    const column = at - (before.lastIndexOf("\n") + 1) + 1;
    console.log(JSON.stringify({ file, line, column, message: e.message }));
  }
}
