import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  formatDuration,
  formatListen,
  formatSize,
  parseDuration,
  parseListen,
  parseRate,
  parseSize,
} from "../../src/config/units.js";

const value = <T>(r: { ok: true; value: T } | { ok: false; error: string }) => (r.ok ? r.value : `error: ${r.error}`);

describe("durations", () => {
  it.each([
    ["30s", 30_000],
    ["7d", 604_800_000],
    ["500ms", 500],
    ["2m", 120_000],
    ["1h", 3_600_000],
    ["1h30m", 5_400_000],
    ["1m5s250ms", 65_250],
    ["1.5s", 1_500],
    ["0", 0],
    [0, 0],
  ] as const)("%s is %d ms", (text, ms) => {
    expect(value(parseDuration(text))).toBe(ms);
  });

  it.each([
    [120, /has no unit.*"120s"/],
    ["", /empty/],
    ["30", /unexpected "30"/],
    ["30 s", /not a duration/],
    ["5x", /not a duration/],
    ["30m1h", /largest first/],
    ["1m1m", /largest first/],
    ["-5s", /not a duration/],
    ["0.5ms", /whole number of milliseconds/],
    [true, /expected a duration/],
  ] as const)("%j is refused", (text, message) => {
    const r = parseDuration(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(message);
  });

  it("formats and parses back to the same milliseconds", () => {
    fc.assert(
      fc.property(fc.nat({ max: 10 * 365 * 86_400_000 }), (ms) => {
        expect(value(parseDuration(formatDuration(ms)))).toBe(ms);
      }),
    );
  });

  it("formats whole units compactly", () => {
    expect(formatDuration(5_400_000)).toBe("1h30m");
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(86_400_000 + 1)).toBe("1d1ms");
  });
});

describe("sizes", () => {
  it.each([
    ["1MiB", 1_048_576],
    ["64KiB", 65_536],
    ["1MB", 1_000_000],
    ["512", 512],
    [512, 512],
    ["1GiB", 1_073_741_824],
    ["1 kib", 1024],
    ["10B", 10],
    ["0.5KiB", 512],
  ] as const)("%s is %d bytes", (text, bytes) => {
    expect(value(parseSize(text))).toBe(bytes);
  });

  it.each([
    ["1 parsec", /unknown unit "parsec"/],
    ["1M", /unknown unit "M"/],
    ["-1", /not a size/],
    ["1.5B", /whole number of bytes/],
    [1.5, /whole, non-negative/],
    ["", /not a size/],
    [[], /expected a size/],
  ] as const)("%j is refused", (text, message) => {
    const r = parseSize(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(message);
  });

  it("formats and parses back to the same bytes", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.nat(),
          fc.nat({ max: 4096 }).map((n) => n * 1024),
          fc.nat({ max: 4096 }).map((n) => n * 1024 ** 3),
        ),
        (bytes) => {
          expect(value(parseSize(formatSize(bytes)))).toBe(bytes);
        },
      ),
    );
    expect(formatSize(65_536)).toBe("64KiB");
    expect(formatSize(1_000_000)).toBe("1000000");
  });
});

describe("rates (EMQX's forms)", () => {
  const bytesRate = (v: unknown) => parseRate(v, parseSize, "1MiB/s");
  it.each([
    ["100/s", 100],
    ["6000/1m", 100],
    ["6000/m", 100],
    ["1/10s", 0.1],
    ["1MiB/s", 1_048_576],
    ["1MB/2s", 500_000],
    [" 10 / 500ms ", 20],
    [250, 250],
    ["0", 0],
    [0, 0],
  ] as const)("%j is %d per second", (text, perSecond) => {
    expect(value(bytesRate(text))).toBeCloseTo(perSecond, 9);
  });

  it.each([
    ["100", /say per what/],
    ["100/x", /"x" is not a duration/],
    ["100/0s", /not a duration/],
    ["lots/s", /is not a rate: "lots" is not a size/],
    [-1, /not a rate/],
    [Number.POSITIVE_INFINITY, /not a rate/],
    [[], /expected a rate/],
  ] as const)("%j is refused", (text, message) => {
    const r = bytesRate(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(message);
  });
});

describe("listen addresses", () => {
  it.each([
    ["0.0.0.0:1883", { host: "0.0.0.0", port: 1883 }],
    ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
    ["localhost:8080", { host: "localhost", port: 8080 }],
    ["[::1]:5672", { host: "::1", port: 5672 }],
    [":1883", { host: "0.0.0.0", port: 1883 }],
    ["", null],
  ] as const)("%j", (text, address) => {
    expect(value(parseListen(text))).toEqual(address);
  });

  it.each([["1883"], ["host:"], ["host:99999"], ["a b:1"], [1883]])("%j is refused", (text) => {
    expect(parseListen(text).ok).toBe(false);
  });

  it("formats and parses back", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("0.0.0.0", "::", "127.0.0.1", "example.com"),
        fc.integer({ min: 0, max: 65_535 }),
        (host, port) => {
          expect(value(parseListen(formatListen({ host, port })))).toEqual({ host, port });
        },
      ),
    );
  });
});
