// A small Chrome DevTools Protocol client for a process started with --inspect=127.0.0.1:PORT:
// allocation sampling (every allocation, including what the young-generation GC collects,
// so it shows allocation per message, not only what stays) and heap snapshots.
import WebSocket from "ws";

export async function attach(port) {
  let list;
  for (let i = 0; i < 50 && !list; i++) {
    list = await fetch(`http://127.0.0.1:${port}/json/list`).then((r) => r.json()).catch(() => undefined);
    if (!list) await new Promise((r) => setTimeout(r, 100));
  }
  const ws = new WebSocket(list[0].webSocketDebuggerUrl, { perMessageDeflate: false, maxPayload: 2 ** 31 });
  await new Promise((res, rej) => ws.once("open", res).once("error", rej));
  let id = 0;
  const pending = new Map();
  const listeners = new Map();
  ws.on("message", (raw) => {
    const m = JSON.parse(raw.toString());
    if (m.id !== undefined) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error.message));
      else p.resolve(m.result);
    } else listeners.get(m.method)?.(m.params);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const i = ++id;
      pending.set(i, { resolve, reject });
      ws.send(JSON.stringify({ id: i, method, params }));
    });
  return { send, on: (method, f) => listeners.set(method, f), close: () => ws.close() };
}

/** Sampled allocations per function (self) and by package, as text. `bytesPerMsg` divides by `messages`. */
export function summariseAllocations(profile, messages, top = 30) {
  const self = new Map();
  const byPlace = new Map();
  let total = 0;
  const walk = (node) => {
    const cf = node.callFrame;
    const bytes = node.selfSize;
    if (bytes > 0) {
      const url = cf.url || "";
      const nm = url.lastIndexOf("node_modules/");
      const place = nm >= 0 ? url.slice(nm + 13).split("/").slice(0, url.slice(nm + 13).startsWith("@") ? 2 : 1).join("/") : url.includes("/dist/") ? `dist/${url.slice(url.indexOf("/dist/") + 6)}` : url || "(native)";
      const k = `${cf.functionName || "(anonymous)"} ${place}${url ? `:${cf.lineNumber + 1}` : ""}`;
      self.set(k, (self.get(k) ?? 0) + bytes);
      byPlace.set(place, (byPlace.get(place) ?? 0) + bytes);
      total += bytes;
    }
    for (const c of node.children ?? []) walk(c);
  };
  walk(profile.head);
  const fmt = (b) => `${(b / messages).toFixed(0).padStart(7)} B/msg ${((100 * b) / total).toFixed(1).padStart(5)}%`;
  const rows = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, b]) => `${fmt(b)}  ${k}`).join("\n");
  return [
    `allocated ${(total / messages).toFixed(0)} bytes per delivered message (sampled; ${messages} messages)`,
    `\n-- by package / file\n${rows(byPlace, 20)}`,
    `\n-- by function (self)\n${rows(self, top)}`,
  ].join("\n");
}

/** A heap snapshot (after a full GC), summarised as { "type:name": { count, size } }. */
export async function heapCensus(insp, byOwner = false) {
  await insp.send("HeapProfiler.enable");
  await insp.send("HeapProfiler.collectGarbage");
  let json = "";
  insp.on("HeapProfiler.addHeapSnapshotChunk", (p) => {
    json += p.chunk;
  });
  await insp.send("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
  const snap = JSON.parse(json);
  const { node_fields, node_types } = snap.snapshot.meta;
  const types = node_types[0];
  const nf = node_fields.length;
  const iType = node_fields.indexOf("type");
  const iName = node_fields.indexOf("name");
  const iSize = node_fields.indexOf("self_size");
  const census = {};
  let total = 0;
  // Who holds each node (its first retainer, by the edge's name): "Owner.field".
  const ef = snap.snapshot.meta.edge_fields;
  const etypes = snap.snapshot.meta.edge_types[0];
  const iEdgeCount = node_fields.indexOf("edge_count");
  const held = new Map();
  for (let i = 0, e = 0; i < snap.nodes.length; i += nf) {
    const owner = snap.strings[snap.nodes[i + iName]];
    const ownerType = types[snap.nodes[i + iType]];
    for (let k = 0; k < snap.nodes[i + iEdgeCount]; k++, e += ef.length) {
      const et = etypes[snap.edges[e]];
      if (et === "weak" || et === "shortcut") continue;
      const to = snap.edges[e + 2];
      if (held.has(to)) continue;
      const en = et === "element" || et === "hidden" ? `[${snap.edges[e + 1]}]` : snap.strings[snap.edges[e + 1]];
      if (ownerType === "object" || ownerType === "closure") held.set(to, `${owner}.${en}`);
    }
  }
  for (let i = 0; i < snap.nodes.length; i += nf) {
    const type = types[snap.nodes[i + iType]];
    let name = type === "object" || type === "closure" || type === "native" ? snap.strings[snap.nodes[i + iName]] : "";
    if (byOwner && (type === "array" || name === "Set" || name === "Map" || type === "closure" || name === "Object")) name += ` <- ${held.get(i) ?? "?"}`;
    const k = `${type}:${name}`;
    const size = snap.nodes[i + iSize];
    const c = (census[k] ??= { count: 0, size: 0 });
    c.count++;
    c.size += size;
    total += size;
  }
  return { census, total };
}

/** What grew between two censuses, per connection, largest first. */
export function censusDiff(a, b, perN, top = 40) {
  const rows = [];
  for (const [k, v] of Object.entries(b.census)) {
    const before = a.census[k] ?? { count: 0, size: 0 };
    const ds = v.size - before.size;
    const dc = v.count - before.count;
    if (ds > 0) rows.push([k, dc / perN, ds / perN]);
  }
  rows.sort((x, y) => y[2] - x[2]);
  return [
    `heap grew ${((b.total - a.total) / perN / 1024).toFixed(2)} KiB per connection`,
    ...rows.slice(0, top).map(([k, c, s]) => `${s.toFixed(0).padStart(7)} B ${c.toFixed(2).padStart(6)} objs  ${k}`),
  ].join("\n");
}
