// "Costing nothing when off" (issue 26): OpenTelemetry is imported by one module, which only
// a dynamic import reaches, taken only when tracing.otlp is set (src/actors/tracing/tracing.ts).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { startTracing } from "../../src/actors/tracing/tracing.js";

const root = join(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("tracing costs nothing when off", () => {
  const files = sources(join(root, "src")).map((f) => ({ file: relative(root, f), text: readFileSync(f, "utf8") }));

  it("only src/actors/tracing/otlp.ts imports OpenTelemetry", () => {
    expect(files.filter((f) => /from "@opentelemetry\//.test(f.text)).map((f) => f.file)).toEqual([
      "src/actors/tracing/otlp.ts",
    ]);
  });

  it("otlp.ts (and generated.ts) are reached only by a dynamic import", () => {
    const staticImports = files.filter((f) => /from "\.\/(otlp|generated)\.js"/.test(f.text)).map((f) => f.file);
    expect(staticImports).toEqual([]);
    const dynamic = files.filter((f) => /await import\("\.\/(otlp|generated)\.js"\)/.test(f.text)).map((f) => f.file);
    expect(dynamic).toEqual(["src/actors/tracing/tracing.ts"]);
  });

  it("no tracing config, no tracing object: the doors see undefined", async () => {
    const log = { info: () => {} } as never;
    const gateway = { id: "g", version: "0" };
    expect(await startTracing({ otlp: null, generate: false }, gateway, log)).toBeUndefined();
    const generated = await startTracing({ otlp: null, generate: true }, gateway, log);
    expect(generated?.constructor.name).toBe("GeneratedTraces");
    const pairs: Array<[string, string]> = [["traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]];
    // A valid trace is left as it is (the same array); none gets a new sampled one.
    const hop = { protocol: "mqtt", clientId: "c", destination: "t", subject: "t", qos: 0, size: 0 } as const;
    expect(generated!.published(hop, pairs)).toBe(pairs);
    expect(generated!.published(hop, undefined)?.[0]?.[1]).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });
});
