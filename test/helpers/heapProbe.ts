import WebSocket from "ws";

/**
 * The heap of a process started with `--inspect=127.0.0.1:<port>`, read through the
 * DevTools protocol after a full collection: what the process keeps, not what it has
 * allocated since the last one.
 */
export interface HeapProbe {
  /**
   * Bytes of objects in use after a forced full GC. Code and bytecode (V8's code and trusted
   * spaces) are left out: they grow as the JIT compiles functions that got hot, by up to 2 KB
   * a session between two reads of a 500-session test, not with what the process keeps.
   */
  usedAfterGc(): Promise<number>;
  close(): void;
}

/** Evaluated in the probed process: the spaces of JS objects, young, old and large. */
const OBJECT_SPACES_USED = `process.getBuiltinModule("v8").getHeapSpaceStatistics()
  .filter((s) => !/^(code|trusted|shared_trusted|read_only)/.test(s.space_name))
  .reduce((sum, s) => sum + s.space_used_size, 0)`;

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
      const r = await send<{ result: { value: number } }>("Runtime.evaluate", {
        expression: OBJECT_SPACES_USED,
        returnByValue: true,
      });
      return r.result.value;
    },
    close: () => ws.close(),
  };
}
