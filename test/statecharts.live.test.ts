import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { machines } from "../src/machines/index.js";
import { launchChromium } from "./helpers/chromium.js";
import { type GatewayHandle, startGateway } from "./helpers/gateway.js";
import { type ConnectedClient, collect, connectMqtt } from "./helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "./helpers/natsServer.js";

// A loaded two-core CI draws eleven charts slowly: every wait is on the page's own state,
// bounded generously, never a sleep.
const PAGE_WAIT = 60_000;
const results = join(import.meta.dirname, "../test-results");

describe("GET /statecharts in headless Chromium", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  const requested: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url, config: { log: { level: "info", format: "json" } } });
    browser = await launchChromium();
    page = await browser.newPage();
    page.on("request", (r) => requested.push(r.url()));
    page.on("pageerror", (e) => pageErrors.push(e.message));
  }, 120_000);

  afterAll(async () => {
    await browser?.dispose();
    await gw?.stop();
    await nats?.stop();
  });

  /** Waits until an element with this test id shows exactly this text. */
  const shows = (testId: string, text: string) =>
    page.waitForFunction(
      ([id, want]) => document.querySelector(`[data-testid="${id}"]`)?.textContent === want,
      [testId, text] as const,
      { timeout: PAGE_WAIT, polling: 100 },
    );

  /** Waits until an element with this test id shows text matching the pattern. */
  const showsMatching = (testId: string, pattern: RegExp) =>
    page.waitForFunction(
      ([id, source]) => new RegExp(source).test(document.querySelector(`[data-testid="${id}"]`)?.textContent ?? ""),
      [testId, pattern.source] as const,
      { timeout: PAGE_WAIT, polling: 100 },
    );

  it("draws every machine and follows MQTT clients live, with a drill-down to one of them", {
    timeout: 240_000,
  }, async () => {
    const base = `http://127.0.0.1:${gw.port("http")}`;
    await page.goto(`${base}/statecharts`, { timeout: PAGE_WAIT });
    await page.locator("body[data-charts=drawn]").waitFor({ timeout: PAGE_WAIT });
    await page.locator("#status[data-connected=true]").waitFor({ timeout: PAGE_WAIT });
    for (const m of machines) {
      expect(await page.locator(`#machine-${m.id}`).getAttribute("data-rendered"), m.id).toBe("true");
      expect(await page.locator(`#chart-${m.id} svg`).count(), m.id).toBe(1);
    }
    // The page's own stream is an actor too.
    await shows("count-statechartsViewer-streaming", "1");
    await shows("count-mqttConnection-session.serving", "0");

    const a = await connectMqtt(gw.port("mqtt"), { clientId: "live-a", protocolVersion: 5 });
    const b = await connectMqtt(gw.port("mqtt"), { clientId: "live-b", protocolVersion: 4 });
    await shows("count-mqttConnection-session.serving", "2");

    const got = collect(b);
    await b.subscribeAsync("live/readings", { qos: 1 });
    await a.publishAsync("live/readings", "21.5", { qos: 1 });
    expect((await got.count(1))[0]!.payload.toString()).toBe("21.5");

    await page.fill("#drill-query", "live-a");
    await page.click("#drill-form button");
    await shows("drill-machine", "mqttConnection");
    await showsMatching("drill-state", /^session\.serving\./);
    const events = await page.locator('[data-testid="drill-transitions"] tbody tr td:nth-child(2)').allTextContents();
    expect(events).toEqual(expect.arrayContaining(["xstate.init", "CONNECT", "NATS_ACQUIRED", "SESSION_READY"]));
    // The drilled actor's state is marked on its chart, and occupied states are coloured.
    await page.locator("#chart-mqttConnection .mqg-selected").first().waitFor({ timeout: PAGE_WAIT });
    expect(await page.locator("#chart-mqttConnection .mqg-occupied").count()).toBeGreaterThan(0);

    // The same actor by its cid (the number in its actor id).
    const actorId = (await page.getByTestId("drill-actor").textContent())!;
    const cid = /^mqtt-(\d+)$/.exec(actorId)?.[1];
    expect(cid).toBeDefined();
    await page.fill("#drill-query", "no-such-client");
    await page.click("#drill-form button");
    await page.locator('[data-testid="drill-error"]').waitFor({ timeout: PAGE_WAIT });
    await page.fill("#drill-query", cid!);
    await page.click("#drill-form button");
    await shows("drill-actor", actorId);
    await showsMatching("drill-state", /^session\.serving\./);

    mkdirSync(results, { recursive: true });
    await page.screenshot({ path: join(results, "statecharts-full.png"), fullPage: true, timeout: PAGE_WAIT });
    // The viewport shot (the one in docs/) centres the drilled actor's state in its chart.
    await page.evaluate(() =>
      document
        .querySelector("#chart-mqttConnection .mqg-selected")!
        .scrollIntoView({ block: "center", inline: "center" }),
    );
    await page.screenshot({ path: join(results, "statecharts.png"), timeout: PAGE_WAIT });

    // One leaves cleanly, the other drops its socket: both actors end and leave the page.
    await a.endAsync();
    (b as ConnectedClient).stream.destroy();
    await shows("count-mqttConnection-session.serving", "0");
    await shows("count-mqttConnection-(total)", "0");
    await shows("drill-state", "(gone)");
    const after = await page.locator('[data-testid="drill-transitions"] tbody tr td:nth-child(2)').allTextContents();
    expect(after, after.join(" ")).toContain("DISCONNECT");

    // Mermaid and the page's script come from the gateway itself.
    expect(requested.filter((u) => !u.startsWith(base))).toEqual([]);
    expect(requested).toContain(`${base}/statecharts/mermaid.min.js`);
    expect(pageErrors).toEqual([]);
  });

  it("for an operator: a client table with state, account and since, entries per second per state, and charts that fit 1400 px", {
    timeout: 240_000,
  }, async () => {
    const base = `http://127.0.0.1:${gw.port("http")}`;
    await page.setViewportSize({ width: 1400, height: 900 });
    await page.goto(`${base}/statecharts`, { timeout: PAGE_WAIT });
    await page.locator("body[data-charts=drawn]").waitFor({ timeout: PAGE_WAIT });
    await page.locator("#status[data-connected=true]").waitFor({ timeout: PAGE_WAIT });

    const clients = await Promise.all(
      ["ops-1", "ops-2", "ops-3"].map((clientId) => connectMqtt(gw.port("mqtt"), { clientId })),
    );
    try {
      await shows("clients-total", "(3)");
      const rows = await page.locator('[data-testid="clients"] tbody tr').evaluateAll((trs) =>
        trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")),
      );
      expect(rows.map((r) => r[2])).toEqual(["ops-1", "ops-2", "ops-3"]);
      for (const r of rows) {
        expect(r[1]).toBe("mqtt");
        expect(r[3]).toBe("$G");
        expect(r[5]).toMatch(/\bserving\b/);
        expect(r[6]).toMatch(/^\d\d:\d\d:\d\d$/);
        expect(r[7]).toMatch(/^\d\d:\d\d:\d\d$/);
      }
      // Three connections entered their serving state within the last seconds: rates above zero.
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll('[data-testid^="rate-mqttConnection-"]')].some(
            (cell) => /serving$/.test(cell.getAttribute("data-testid") ?? "") && Number(cell.textContent) > 0,
          ),
        undefined,
        { timeout: PAGE_WAIT, polling: 100 },
      );
      // Nothing scrolls sideways: not the page, not a chart.
      const overflow = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth,
        wide: [...document.querySelectorAll("body *")]
          .filter((e) => e.getBoundingClientRect().right > 1400)
          .slice(0, 8)
          .map((e) => `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`),
        charts: [...document.querySelectorAll(".chart, #clients")]
          .filter((c) => c.scrollWidth > c.clientWidth + 1)
          .map((c) => c.id),
      }));
      expect(overflow).toEqual({ page: 1400, wide: [], charts: [] });
      mkdirSync(results, { recursive: true });
      await page.screenshot({ path: join(results, "statecharts-1400.png"), timeout: PAGE_WAIT });
    } finally {
      for (const c of clients) c.end(true);
    }
    expect(pageErrors).toEqual([]);
  });
});
