/**
 * SQL LIKE without regular expressions (docs/decisions/amqp-filters.md). A pattern is
 * compiled once into literal runs between `%`, with `_` as "any one character"; matching
 * walks the value with one resume point per `%` (the greedy wildcard walk), which takes
 * at most |value| x |pattern| steps whatever the pattern: no backtracking blow-up of the
 * kind a regex built from user text can have. Characters are code points (JMS: `_` is
 * one character). Pure.
 */

/** One pattern item: a literal code point, or `_` (any one). */
type Item = number | typeof ANY;
const ANY = -1;

export type LikeMatcher = (value: string) => boolean;

/** The compiled pattern; `escapeChar` makes the next `%`, `_` or itself literal. */
export function compileLike(pattern: string, escapeChar?: string): LikeMatcher {
  const items: Array<Item | "%"> = [];
  const cps = Array.from(pattern);
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i]!;
    if (escapeChar !== undefined && c === escapeChar && i + 1 < cps.length) {
      items.push(cps[++i]!.codePointAt(0)!);
    } else if (c === "%") {
      if (items[items.length - 1] !== "%") items.push("%");
    } else if (c === "_") items.push(ANY);
    else items.push(c.codePointAt(0)!);
  }
  // The common shapes need no walk: exact, prefix, suffix.
  const plain = (xs: Array<Item | "%">) => xs.every((x) => typeof x === "number" && x !== ANY);
  const text = (xs: Array<Item | "%">) => String.fromCodePoint(...(xs as number[]));
  const stars = items.filter((x) => x === "%").length;
  if (stars === 0 && plain(items)) {
    const s = text(items);
    return (v) => v === s;
  }
  if (stars === 1 && items[items.length - 1] === "%" && plain(items.slice(0, -1))) {
    const s = text(items.slice(0, -1));
    return (v) => v.startsWith(s);
  }
  if (stars === 1 && items[0] === "%" && plain(items.slice(1))) {
    const s = text(items.slice(1));
    return (v) => v.endsWith(s);
  }
  return (v) =>
    walk(
      items,
      Array.from(v, (c) => c.codePointAt(0)!),
    );
}

/**
 * The greedy wildcard walk: on a mismatch, go back to just after the last `%` and let it
 * take one more character. Each resume moves the value's start forward, so the steps
 * are bounded by |value| x |pattern|.
 */
function walk(p: ReadonlyArray<Item | "%">, v: readonly number[]): boolean {
  let pi = 0;
  let vi = 0;
  let starP = -1;
  let starV = 0;
  while (vi < v.length) {
    const x = p[pi];
    if (x !== undefined && x !== "%" && (x === ANY || x === v[vi])) {
      pi++;
      vi++;
    } else if (x === "%") {
      starP = pi++;
      starV = vi;
    } else if (starP >= 0) {
      pi = starP + 1;
      vi = ++starV;
    } else return false;
  }
  while (p[pi] === "%") pi++;
  return pi === p.length;
}
