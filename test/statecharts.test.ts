import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { machines } from "../src/machines/index.js";
import { statechartPage, statechartSvg } from "../src/statecharts/write.js";

const dir = join(import.meta.dirname, "../docs/statecharts");
const committed = (file: string) => {
  try {
    return readFileSync(join(dir, file), "utf8");
  } catch {
    return "(missing)";
  }
};

describe("docs/statecharts", () => {
  it.each(machines.map((m) => [m.id, m] as const))(
    "%s.md matches what the machine generates (run `npm run statecharts`)",
    (id, machine) => {
      expect(committed(`${id}.md`)).toBe(statechartPage(machine));
    },
  );

  // The live page serves these files as they are: a stale one would draw states the machine no longer has.
  it.each(machines.map((m) => [m.id, m] as const))(
    "%s.svg matches what ELK lays out for the machine (run `npm run statecharts`)",
    {
      timeout: 60_000,
    },
    async (id, machine) => {
      expect(committed(`${id}.svg`)).toBe(await statechartSvg(machine));
    },
  );
});
