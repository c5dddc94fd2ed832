// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by file or
// package, and inclusive time by function, as plain text.
import { readFileSync } from "node:fs";

function place(cf) {
  const url = cf.url || "";
  if (!url) return cf.functionName.startsWith("(") ? cf.functionName : "(native)";
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split("/");
    return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith("node:")) return url;
  const dist = url.indexOf("/dist/");
  if (dist >= 0) return `dist/${url.slice(dist + 6)}`;
  return url.replace(/^file:\/\//, "");
}

function key(cf) {
  const file = place(cf);
  return `${cf.functionName || "(anonymous)"} ${file}${cf.url ? `:${cf.lineNumber + 1}` : ""}`;
}

export function summarise(path, top = 30) {
  const prof = JSON.parse(readFileSync(path, "utf8"));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Sample counts per node, from the samples array (hitCount may be absent).
  const hits = new Map();
  for (const s of prof.samples) hits.set(s, (hits.get(s) ?? 0) + 1);
  const total = prof.samples.length;
  const durationMs = (prof.endTime - prof.startTime) / 1000;
  const self = new Map();
  const selfPlace = new Map();
  const incl = new Map();
  for (const [id, h] of hits) {
    const n = byId.get(id);
    const k = key(n.callFrame);
    self.set(k, (self.get(k) ?? 0) + h);
    const p = place(n.callFrame);
    selfPlace.set(p, (selfPlace.get(p) ?? 0) + h);
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const ck = key(byId.get(cur).callFrame);
      if (seen.has(ck)) continue;
      seen.add(ck);
      incl.set(ck, (incl.get(ck) ?? 0) + h);
    }
  }
  const idle = [...hits].filter(([id]) => byId.get(id).callFrame.functionName === "(idle)").reduce((a, [, h]) => a + h, 0);
  const busy = total - idle;
  const pct = (h) => `${((100 * h) / busy).toFixed(1).padStart(5)}%`;
  const rows = (m, n) =>
    [...m]
      .filter(([k]) => !k.startsWith("(idle)"))
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, h]) => `${pct(h)}  ${k}`)
      .join("\n");
  return [
    `${path}\n${total} samples over ${durationMs.toFixed(0)} ms, ${(100 * (busy / total)).toFixed(0)}% busy; percentages are of busy samples`,
    `\n-- self time by package / file\n${rows(selfPlace, 25)}`,
    `\n-- self time by function\n${rows(self, top)}`,
    `\n-- inclusive time by function\n${rows(incl, top)}`,
  ].join("\n");
}

if (process.argv[1] === import.meta.filename) console.log(summarise(process.argv[2], Number(process.argv[3] ?? 30)));
