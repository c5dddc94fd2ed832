/**
 * NATS subject matching: `*` is one token, `>` one or more trailing tokens. Used to tell
 * which stream stores a subject and whether a wildcard source lies inside one stream.
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  // A scan, not split(): it runs per message (delivery guard, stored-subject lookups).
  let pi = 0;
  let si = 0; // start of the subject's next token; -1 once its last token is taken
  for (;;) {
    let pe = pattern.indexOf(".", pi);
    if (pe < 0) pe = pattern.length;
    const single = pe - pi === 1;
    if (single && pattern.charCodeAt(pi) === GT) return si >= 0;
    if (si < 0) return false;
    let se = subject.indexOf(".", si);
    if (se < 0) se = subject.length;
    if (!(single && pattern.charCodeAt(pi) === STAR) && !sameToken(pattern, pi, pe, subject, si, se)) return false;
    const subjectDone = se === subject.length;
    if (pe === pattern.length) return subjectDone;
    pi = pe + 1;
    si = subjectDone ? -1 : se + 1;
  }
}

const STAR = 0x2a;
const GT = 0x3e;

function sameToken(a: string, from: number, to: number, b: string, bFrom: number, bTo: number): boolean {
  if (to - from !== bTo - bFrom) return false;
  for (let i = 0; i < to - from; i++) if (a.charCodeAt(from + i) !== b.charCodeAt(bFrom + i)) return false;
  return true;
}

/** True when every subject `inner` (itself possibly a wildcard) can match is matched by `outer`. */
export function patternCovers(outer: string, inner: string): boolean {
  const o = outer.split(".");
  const n = inner.split(".");
  for (let i = 0; i < o.length; i++) {
    const a = o[i];
    if (a === ">") return n.length > i;
    if (i >= n.length) return false;
    const b = n[i];
    if (b === ">") return false;
    if (a === "*") continue;
    if (b === "*" || a !== b) return false;
  }
  return o.length === n.length;
}

/** True when some subject matches both patterns. */
export function patternsOverlap(a: string, b: string): boolean {
  const x = a.split(".");
  const y = b.split(".");
  for (let i = 0; ; i++) {
    const s = x[i];
    const t = y[i];
    if (s === undefined || t === undefined) return s === t;
    // Both have a token here, and `>` takes it and whatever follows.
    if (s === ">" || t === ">") return true;
    if (s !== "*" && t !== "*" && s !== t) return false;
  }
}
