// The layout rules issue 15 asks for, checked on the source: machines and codecs stay pure,
// third-party internals stay in src/vendor, and the only boolean fields in the actors are
// the scheduling guards and records docs/decisions/scheduling-guards.md lists.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) out.push(...sources(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}
const text = (path: string) => readFileSync(join(root, path), "utf8");

describe("the layout of src", () => {
  it("machines and protocol codecs import nothing from the actors or the vendor modules", () => {
    const offending = [...sources("src/machines"), ...sources("src/protocol")].filter((f) =>
      /from "\.\.\/(actors|vendor)\//.test(text(f)),
    );
    expect(offending).toEqual([]);
  });

  it("neither door imports the other, and what both share (actors/client) imports neither", () => {
    // Shared steps live in src/actors/client (issue 23): the AMQP door once imported MQTT's stored publisher.
    const importsDoor = (door: string) => new RegExp(`from "(\\.\\./)+(actors/)?${door}/`);
    const offending = [
      ...sources("src/actors/amqp").filter((f) => importsDoor("mqtt").test(text(f))),
      ...sources("src/actors/mqtt").filter((f) => importsDoor("amqp").test(text(f))),
      ...sources("src/actors/client").filter((f) => importsDoor("(mqtt|amqp)").test(text(f))),
    ];
    expect(offending).toEqual([]);
    // The rule sees an import written as the doors write theirs.
    expect(importsDoor("mqtt").test('import { x } from "../mqtt/storedPublish.js";')).toBe(true);
  });

  it("only actors/client touches a NATS connection; the rest goes through its seam (client/natsSeam.ts)", () => {
    // Issue 23: a NatsConnection named, a lease's `.nc`, or nats.js's connect / jetstream /
    // jetstreamManager imported (the JetStream and KV clients made from a connection).
    // src/vendor patches nats.js; src/cli is a NATS client tool of its own.
    const touchesConnection =
      /\.nc\b|\["nc"\]|\bNatsConnection\b|import\s*(type\s*)?\{[^}]*\b(connect|jetstream|jetstreamManager)\b[^}]*\}\s*from\s*"@nats-io\/(transport-node|jetstream)"/;
    const offending = sources("src").filter(
      (f) => !/^src\/(actors\/client|vendor|cli)\//.test(f) && touchesConnection.test(text(f)),
    );
    expect(offending).toEqual([]);
    // The rule sees the lines as the code wrote them before the seam.
    expect(touchesConnection.test("    const nc = link.lease.nc;")).toBe(true);
    expect(touchesConnection.test('import type { Msg, NatsConnection } from "@nats-io/transport-node";')).toBe(true);
    expect(touchesConnection.test('import { jetstream, jetstreamManager } from "@nats-io/jetstream";')).toBe(true);
    expect(touchesConnection.test('import { type JetStreamManager } from "@nats-io/jetstream";')).toBe(false);
  });

  it("third-party internals are read or patched in src/vendor only", () => {
    // The names of the internals src/vendor wraps (docs/decisions/vendor-patches.md).
    const internals =
      /rhea\/lib\/|\beventListeners\b|\._stop\(|\b_rdata\b|\b_msg\b|mqtt\.parser\(|next_pending_delivery|_incomplete\b|open_requests|local\.begin|remote\?\.(attach|detach|channel)|\.options\?\.inboxPrefix/;
    const offending = sources("src").filter((f) => !f.startsWith("src/vendor/") && internals.test(text(f)));
    expect(offending).toEqual([]);
  });

  it("the only boolean fields in src/actors are the listed scheduling guards and records", () => {
    const found = execFileSync("bash", [join(root, "scripts/boolean-fields.sh")], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean);
    const listed = text("docs/decisions/scheduling-guards.md");
    const unlisted = found.filter((line) => {
      const [, file, name] =
        /^src\/actors\/(\S+?):\d+:\s*(?:private |protected |public |let )?(?:static )?([a-zA-Z_]+)/.exec(line) ?? [];
      if (!file || !name) return true;
      // A row of the page: | `file` | `field` or `Record.field` | ...
      return !new RegExp(`\\| \`${file.replace(/[.]/g, "\\.")}\` \\| \`([A-Za-z]+\\.)?${name}\` \\|`).test(listed);
    });
    expect(unlisted).toEqual([]);
    expect(found.length).toBeGreaterThan(0);
  });
});
