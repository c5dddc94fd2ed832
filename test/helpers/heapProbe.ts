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
  // Node opens the inspector before it runs the script: a process that has started serving has it.
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const target = list[0];
  if (!target) throw new Error(`no inspector target on port ${port}`);
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
