import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { machines } from "../machines/index.js";
import { toMermaid } from "./mermaid.js";

/** The markdown page of one machine: what `statecharts` writes and the test compares. */
export function statechartPage(machine: (typeof machines)[number]): string {
  return [
    `# ${machine.id}`,
    "",
    `Generated from \`src/machines\` by \`mq-gateway statecharts\`; do not edit by hand.`,
    "",
    "```mermaid",
    toMermaid(machine).trimEnd(),
    "```",
    "",
  ].join("\n");
}

/** Writes one Mermaid diagram per machine into outDir; returns the files written. */
export async function writeStatecharts(outDir: string): Promise<string[]> {
  mkdirSync(outDir, { recursive: true });
  return machines.map((m) => {
    const file = join(outDir, `${m.id}.md`);
    writeFileSync(file, statechartPage(m));
    return file;
  });
}
