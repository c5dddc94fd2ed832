import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AnyStateMachine } from "xstate";
import { machines } from "../machines/index.js";
import { layoutMachine } from "./layout.js";
import { toMermaid } from "./mermaid.js";
import { chartSvg } from "./svg.js";

/** The markdown page of one machine: what `statecharts` writes and the test compares. */
export function statechartPage(machine: AnyStateMachine): string {
  return [
    `# ${machine.id}`,
    "",
    `Generated from \`src/machines\` by \`mq-gateway statecharts\`; do not edit by hand.`,
    "",
    `![${machine.id}](${machine.id}.svg)`,
    "",
    "The same chart as Mermaid text:",
    "",
    "```mermaid",
    toMermaid(machine).trimEnd(),
    "```",
    "",
  ].join("\n");
}

/**
 * The drawing of one machine, laid out by ELK: what the live page serves (it lays out
 * nothing itself, ELK takes seconds for the biggest machines) and the test compares.
 */
export async function statechartSvg(machine: AnyStateMachine): Promise<string> {
  return chartSvg(await layoutMachine(machine));
}

/** Writes one page and one drawing per machine into outDir; returns the files written. */
export async function writeStatecharts(outDir: string): Promise<string[]> {
  mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  for (const m of machines) {
    const md = join(outDir, `${m.id}.md`);
    const svg = join(outDir, `${m.id}.svg`);
    writeFileSync(md, statechartPage(m));
    writeFileSync(svg, await statechartSvg(m));
    written.push(md, svg);
  }
  return written;
}
