import { type ChildProcess, spawn } from "node:child_process";
import { basename } from "node:path";

export type Line = Record<string, unknown>;

/**
 * A Python client script run with the system python (Debian's paho-mqtt and qpid-proton
 * live there, not in a pyenv one), printing one JSON object per line; its lines can be
 * awaited, each wait bounded.
 */
export function runPython(script: string, args: string[]) {
  const proc: ChildProcess = spawn("/usr/bin/python3", [script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const name = basename(script);
  const lines: Line[] = [];
  let stderr = "";
  let rest = "";
  const waiters: Array<() => void> = [];
  proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    rest += chunk;
    const parts = rest.split("\n");
    rest = parts.pop() ?? "";
    for (const p of parts) if (p.trim()) lines.push(JSON.parse(p) as Line);
    for (const w of waiters.splice(0)) w();
  });
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  void exited.then(() => {
    for (const w of waiters.splice(0)) w();
  });
  const wake = (left: number) =>
    new Promise<void>((r) => {
      const t = setTimeout(r, left);
      waiters.push(() => {
        clearTimeout(t);
        r();
      });
    });
  return {
    lines,
    /** Waits until `count` lines have arrived (or the script exits), within a bound. */
    async upTo(count: number, ms = 15_000): Promise<Line[]> {
      const deadline = Date.now() + ms;
      while (lines.length < count && proc.exitCode === null) {
        const left = deadline - Date.now();
        if (left <= 0) break;
        await wake(left);
      }
      if (lines.length < count) throw new Error(`${name}: ${lines.length} of ${count} lines; stderr:\n${stderr}`);
      return lines.slice(0, count);
    },
    /** The first line that `predicate` accepts, within a bound. */
    async line(predicate: (l: Line) => boolean, ms = 15_000): Promise<Line> {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = lines.find(predicate);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0 || proc.exitCode !== null)
          throw new Error(`${name}: no such line in ${JSON.stringify(lines).slice(0, 2000)}; stderr:\n${stderr}`);
        await wake(left);
      }
    },
    async exit(ms = 15_000): Promise<number | null> {
      const t = setTimeout(() => proc.kill("SIGKILL"), ms);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
    kill(): void {
      if (proc.exitCode === null) proc.kill("SIGKILL");
    },
  };
}
