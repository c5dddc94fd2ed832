import WebSocket from "ws";

/**
 * The heap of a process started with `--inspect=127.0.0.1:<port>`, read through the
 * DevTools protocol after a full collection: what the process keeps, not what it has
 * allocated since the last one.
 */
export interface HeapProbe {
  /** Bytes in use after a forced full GC. */
  usedAfterGc(): Promise<number>;
  close(): void;
}

export async function attachHeapProbe(port: number): Promise<HeapProbe> {
  let target: { webSocketDebuggerUrl: string } | undefined;
  for (let i = 0; i < 100 && !target; i++) {
    const list = await fetch(`http://127.0.0.1:${port}/json/list`)
      .then((r) => r.json() as Promise<Array<{ webSocketDebuggerUrl: string }>>)
      .catch(() => undefined);
    target = list?.[0];
    if (!target) await new Promise((r) => setTimeout(r, 100));
  }
  if (!target) throw new Error(`no inspector on port ${port}`);
  const ws = new WebSocket(target.webSocketDebuggerUrl, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  let nextId = 0;
  const pending = new Map<number, { resolve: (r: unknown) => void; reject: (e: Error) => void }>();
  ws.on("message", (raw) => {
    const m = JSON.parse(raw.toString()) as { id?: number; result?: unknown; error?: { message: string } };
    if (m.id === undefined) return;
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p?.reject(new Error(m.error.message));
    else p?.resolve(m.result);
  });
  const send = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve: resolve as (r: unknown) => void, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  await send("HeapProfiler.enable");
  return {
    async usedAfterGc() {
      await send("HeapProfiler.collectGarbage");
      return (await send<{ usedSize: number }>("Runtime.getHeapUsage")).usedSize;
    },
    close: () => ws.close(),
  };
}
