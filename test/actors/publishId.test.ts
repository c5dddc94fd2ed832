// A new publish's Nats-Msg-Id (docs/decisions/publish-identity.md): unique per publish in
// a process, and unlike any other process's (a restarted gateway's).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { newPublishId } from "../../src/actors/publishId.js";

const dist = join(import.meta.dirname, "../../dist/actors/publishId.js");
const idsOfAnotherProcess = (n: number): string[] =>
  JSON.parse(
    execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { newPublishId } from ${JSON.stringify(dist)}; console.log(JSON.stringify(Array.from({ length: ${n} }, newPublishId)))`,
      ],
      { encoding: "utf8" },
    ),
  );

describe("publish ids", () => {
  it("never repeat within a process, and are valid Nats-Msg-Id values", () => {
    const ids = Array.from({ length: 200_000 }, newPublishId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of [ids[0]!, ids.at(-1)!]) expect(id).toMatch(/^[A-Za-z0-9_-]{17,}$/);
  });

  it("never meet another process's, which draws its own prefix (a gateway restart)", () => {
    const mine = new Set(Array.from({ length: 1_000 }, newPublishId));
    const theirs = idsOfAnotherProcess(1_000);
    expect(theirs.filter((id) => mine.has(id))).toEqual([]);
    expect(theirs[0]!.slice(0, 16)).not.toBe([...mine][0]!.slice(0, 16));
  });
});
