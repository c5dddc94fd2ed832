import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mqgw-tracing-config-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(yaml: string) {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(path, yaml);
  return loadConfig({ file: path, flags: {} });
}

describe("tracing (docs/decisions/trace-context.md)", () => {
  it("is off by default: no URL, no generated traces", async () => {
    const r = await loadConfig({ flags: {} });
    expect(r.ok && r.config.tracing).toEqual({ otlp: null, generate: false });
  });

  it("an OTLP base URL gets the traces path; a full one stays; '' is off", async () => {
    const base = await load("tracing:\n  otlp: http://collector:4318\n  generate: true\n");
    expect(base.ok && base.config.tracing).toEqual({ otlp: "http://collector:4318/v1/traces", generate: true });
    const full = await load("tracing:\n  otlp: https://otel.example/custom/traces\n");
    expect(full.ok && full.config.tracing.otlp).toBe("https://otel.example/custom/traces");
    const off = await load('tracing:\n  otlp: ""\n');
    expect(off.ok && off.config.tracing.otlp).toBeNull();
  });

  it("refuses what is not an http(s) URL, and unknown keys", async () => {
    const r = await load("tracing:\n  otlp: grpc://collector:4317\n  sample: 1\n");
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.problems).toContainEqual(expect.stringMatching(/^tracing\.otlp: is not an http\(s\) URL/));
      expect(r.problems).toContainEqual(expect.stringMatching(/^tracing\.sample: unknown key/));
    }
  });
});
