import type { EventObject } from "xstate";
import type { PathStep, Report } from "./check.js";

/** A report as the CLI prints it: counts, each property, and each counter-example step by step. */
export function formatReport(report: Report): string {
  const ok = report.findings.length === 0;
  const lines = [
    `${ok ? "ok  " : "FAIL"} ${report.machine}: ${report.states} states, ${report.transitions} transitions explored`,
    `     bound: ${report.bound}`,
  ];
  const failed = new Set(report.findings.map((f) => f.property));
  for (const p of report.properties) lines.push(`     ${failed.has(p) ? "✗" : "✓"} ${p}`);
  for (const f of report.findings) {
    lines.push(`     ${f.kind} broken: ${f.property}: ${f.message}`);
    if (f.path.length)
      lines.push(
        `     shortest counter-example (${f.path.length - 1} steps):`,
        ...f.path.map((s, i) => `       ${formatStep(s, i)}`),
      );
  }
  return lines.join("\n");
}

function formatStep(step: PathStep, i: number): string {
  const emitted = step.emitted.length ? `  emits ${step.emitted.join(", ")}` : "";
  return `${String(i).padStart(2)}. ${formatEvent(step.event)} -> ${step.state}${emitted}`;
}

/** The event type and its payload in short: enough to tell abstract events apart. */
export function formatEvent(event: EventObject): string {
  const { type, ...rest } = event as EventObject & Record<string, unknown>;
  const payload = JSON.stringify(rest, (_k, v) => (v instanceof Uint8Array ? `<${v.length} bytes>` : v));
  return payload === "{}" ? type : `${type} ${payload.length > 120 ? `${payload.slice(0, 117)}...` : payload}`;
}
