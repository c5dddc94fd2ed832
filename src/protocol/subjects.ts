/**
 * NATS subject matching: `*` is one token, `>` one or more trailing tokens. Used to tell
 * which stream stores a subject and whether a wildcard source lies inside one stream.
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    const t = p[i];
    if (t === ">") return s.length > i;
    if (i >= s.length) return false;
    if (t !== "*" && t !== s[i]) return false;
  }
  return p.length === s.length;
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
