import { check } from "./check.js";
import { formatReport } from "./format.js";
import type { Model } from "./model.js";

/**
 * Checks each model, writes each report, and answers the exit code: 1 when any property
 * is broken. `machineIds` (the registry's) lets it point out machines nobody modelled.
 */
export function runModelCheck(
  models: readonly Model[],
  machineIds: readonly string[],
  write: (text: string) => void,
): number {
  const started = Date.now();
  let failed = 0;
  let states = 0;
  let transitions = 0;
  for (const model of models) {
    const report = check(model);
    states += report.states;
    transitions += report.transitions;
    if (report.findings.length) failed++;
    write(`${formatReport(report)}\n`);
  }
  const modelled = new Set(models.map((m) => m.machine.id));
  const missing = machineIds.filter((id) => !modelled.has(id));
  if (missing.length) write(`note: no model for ${missing.join(", ")} (docs/extending.md says how to add one)\n`);
  const verdict = failed
    ? `FAIL: ${failed} of ${models.length} models break a property`
    : `ok: ${models.length} models`;
  write(`${verdict}; ${states} states, ${transitions} transitions explored in ${Date.now() - started} ms\n`);
  return failed ? 1 : 0;
}
