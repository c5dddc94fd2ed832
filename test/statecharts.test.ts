import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { machines } from "../src/machines/index.js";
import { statechartPage } from "../src/statecharts/write.js";

const dir = join(import.meta.dirname, "../docs/statecharts");

describe("docs/statecharts", () => {
  it.each(machines.map((m) => [m.id, m] as const))("%s.md matches what the machine generates (run `npm run statecharts`)", (id, machine) => {
    let committed = "";
    try {
      committed = readFileSync(join(dir, `${id}.md`), "utf8");
    } catch {
      committed = "(missing)";
    }
    expect(committed).toBe(statechartPage(machine));
  });
});
