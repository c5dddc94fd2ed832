import { check, type Report } from "./check.js";
import { formatReport } from "./format.js";
import type { Model } from "./model.js";
import type { SystemModel } from "./system.js";
import { checkSystem } from "./systemCheck.js";

/**
 * Checks each model, writes each report, and answers the exit code: 1 when any property
 * is broken. `machineIds` (the registry's) lets it point out machines nobody modelled.
 */
export function runModelCheck(
  models: readonly (Model | SystemModel<never>)[],
  machineIds: readonly string[],
  write: (text: string) => void,
): number {
  const started = Date.now();
  let failed = 0;
  let states = 0;
  let transitions = 0;
  for (const model of models) {
    const report: Report = isSystem(model) ? checkSystem(model) : check(model);
    states += report.states;
    transitions += report.transitions;
    if (report.findings.length) failed++;
    write(`${formatReport(report)}\n`);
  }
  const modelled = new Set(
    models.flatMap((m) => (isSystem(m) ? Object.values(m.actors).map((a) => a.machine.id) : [m.machine.id])),
  );
  const missing = machineIds.filter((id) => !modelled.has(id));
  if (missing.length) write(`note: no model for ${missing.join(", ")} (docs/extending.md says how to add one)\n`);
  const systems = models.filter(isSystem).length;
  const counted = systems ? `${models.length - systems} models and ${systems} systems` : `${models.length} models`;
  const verdict = failed ? `FAIL: ${failed} of ${counted} break a property` : `ok: ${counted}`;
  write(`${verdict}; ${states} states, ${transitions} transitions explored in ${Date.now() - started} ms\n`);
  return failed ? 1 : 0;
}

const isSystem = (m: Model | SystemModel<never>): m is SystemModel<never> =>
  (m as SystemModel<never>).kind === "system";
