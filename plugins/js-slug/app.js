// js-slug: URL slugs and title case.
import { skill, InvalidInput } from "./skillhost.js";

// Latin letters with diacritics → ASCII (the engine has no Unicode
// normalization tables, so the common ones are listed).
const FOLD = {
  a: "àáâãäåā", c: "çćč", d: "ď", e: "èéêëēėę", i: "ìíîïī", l: "ł", n: "ñń",
  o: "òóôõöøō", s: "śšß", u: "ùúûüū", y: "ýÿ", z: "źżž",
};
const ASCII = new Map();
for (const [to, from] of Object.entries(FOLD)) for (const ch of from) ASCII.set(ch, to);

const SMALL = new Set(["a", "an", "and", "as", "at", "but", "by", "for", "in", "of", "on", "or", "the", "to"]);

function make({ text, max_length }) {
  const slug = text
    .toLowerCase()
    .replace(/[^\x00-\x7f]/g, (ch) => ASCII.get(ch) ?? ch)
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  if (!slug) throw new InvalidInput("field `text`: has no letters or digits to make a slug of");
  if (max_length === undefined || slug.length <= max_length) return { slug };
  const cut = slug.slice(0, max_length + 1);
  const at = cut.lastIndexOf("-");
  return { slug: (at > 0 ? cut.slice(0, at) : slug.slice(0, max_length)).replace(/-+$/, "") };
}

function title({ text }) {
  const words = text.trim().split(/\s+/).filter(Boolean);
  const out = words.map((w, i) => {
    const lower = w.toLowerCase();
    if (i > 0 && i < words.length - 1 && SMALL.has(lower)) return lower;
    return lower.charAt(0).toUpperCase() + lower.slice(1);
  });
  return { text: out.join(" ") };
}

export const tools = skill({ "slug.make": make, "slug.title": title });
