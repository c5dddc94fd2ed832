// The live statecharts page's script, run by the browser (served as /statecharts/page.js).
// It draws each machine with Mermaid, then keeps the counts and the drill-down current
// from the gateway's event stream. No framework: a few tables and one SVG per machine.
import type { MachineView } from "./page.js";

declare const mermaid: {
  initialize(config: Record<string, unknown>): void;
  render(id: string, text: string): Promise<{ svg: string }>;
};

interface TransitionView {
  readonly machine: string;
  readonly actor: string;
  readonly at: number;
  readonly event: string;
  readonly from: string;
  readonly to: string;
}

interface ActorView {
  readonly machine: string;
  readonly id: string;
  readonly state: string;
  readonly recent: TransitionView[];
  readonly client?: Record<string, unknown>;
  readonly others?: number[];
}

type Counts = Record<string, Record<string, number>>;

interface ClientRow {
  readonly cid: number;
  readonly protocol: string;
  readonly client_id: string;
  readonly account: string;
  readonly remote: string;
  readonly since: string;
  readonly state: string;
  readonly state_since: string | null;
}

/** Entries into each state so far, as the gateway counts them, and when it said so. */
interface EnteredSample {
  readonly at: number;
  readonly entered: Counts;
}
const RATE_WINDOW_MS = 10_000;
const CLIENTS_SHOWN = 200;
const CLIENTS_POLL_MS = 2_000;
let samples: EnteredSample[] = [];

const FEED_ROWS = 50;
const views = JSON.parse(document.getElementById("machine-data")!.textContent!) as MachineView[];
let counts: Counts = {};
let selected: ActorView | undefined;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function headRow(names: readonly string[]): HTMLTableSectionElement {
  const head = el("thead");
  const row = el("tr");
  row.append(...names.map((n) => el("th", {}, n)));
  head.append(row);
  return head;
}

/** Mermaid's node for a state path: its ids carry the chart's node id (`serving_online`). */
function svgNode(machine: string, path: string): Element | undefined {
  const nodeId = path.replaceAll(".", "_");
  const pattern = new RegExp(`(^|-)state-${nodeId.replace(/[$]/g, "\\$&")}-\\d+$`);
  const chart = document.getElementById(`chart-${machine}`);
  for (const g of chart?.querySelectorAll("g[id]") ?? []) if (pattern.test(g.id)) return g;
  return undefined;
}

/** Whether a configuration (`a.b | a.c`, one path per parallel region) is in a state or below it. */
const within = (config: string, path: string) =>
  config.split(" | ").some((p) => p === path || p.startsWith(`${path}.`));

/** Actors in a state or any state below it (a parent counts its children, each actor once). */
function countIn(machine: string, path: string): number {
  let n = 0;
  for (const [config, k] of Object.entries(counts[machine] ?? {})) if (within(config, path)) n += k;
  return n;
}

function buildSections(): void {
  const main = document.getElementById("machines")!;
  for (const v of views) {
    const section = el("section", {
      class: "machine",
      id: `machine-${v.id}`,
      "data-machine": v.id,
      "data-rendered": "false",
    });
    section.append(el("h2", {}, v.id));
    const body = el("div", { class: "machine-body" });
    const table = el("table", { "data-testid": `counts-${v.id}` });
    table.append(headRow(["state", "actors", "entered/s"]));
    const tbody = el("tbody");
    for (const path of [...v.states, "(total)"]) {
      const row = el("tr", { "data-state": path });
      const depth = path === "(total)" ? 0 : path.split(".").length - 1;
      row.append(el("td", { style: `padding-left:${0.6 + depth}rem` }, path.split(".").pop()!));
      row.append(el("td", { class: "count", "data-testid": `count-${v.id}-${path}` }, "0"));
      row.append(el("td", { class: "rate", "data-testid": `rate-${v.id}-${path}` }, path === "(total)" ? "" : "0"));
      tbody.append(row);
    }
    table.append(tbody);
    body.append(table, el("div", { class: "chart", id: `chart-${v.id}` }));
    section.append(body);
    main.append(section);
  }
}

async function drawCharts(): Promise<void> {
  // Natural size (the section scrolls) rather than shrunk to fit; a chart that cannot be
  // drawn says so in its section instead of Mermaid's banner at the end of the page.
  mermaid.initialize({
    startOnLoad: false,
    securityLevel: "strict",
    suppressErrorRendering: true,
    // Scaled to the chart's column, so the page fits the window (the drill-down still marks states).
    state: { useMaxWidth: true },
  });
  for (const v of views) {
    const section = document.getElementById(`machine-${v.id}`)!;
    try {
      const { svg } = await mermaid.render(`svg-${v.id}`, v.chart);
      document.getElementById(`chart-${v.id}`)!.innerHTML = svg;
      section.dataset.rendered = "true";
    } catch (e) {
      document.getElementById(`chart-${v.id}`)!.textContent = `could not draw: ${(e as Error).message}`;
      section.dataset.rendered = "error";
    }
  }
  document.body.dataset.charts = "drawn";
  paintCounts();
}

function paintCounts(): void {
  for (const v of views) {
    let total = 0;
    for (const n of Object.values(counts[v.id] ?? {})) total += n;
    for (const path of v.states) {
      const n = countIn(v.id, path);
      const cell = document.querySelector(`[data-testid="count-${v.id}-${path}"]`);
      if (cell) cell.textContent = String(n);
      cell?.parentElement?.classList.toggle("occupied", n > 0);
      svgNode(v.id, path)?.classList.toggle("mqg-occupied", n > 0);
    }
    const totalCell = document.querySelector(`[data-testid="count-${v.id}-(total)"]`);
    if (totalCell) totalCell.textContent = String(total);
  }
  for (const g of document.querySelectorAll(".mqg-selected")) g.classList.remove("mqg-selected");
  for (const path of selected?.state ? selected.state.split(" | ") : [])
    svgNode(selected!.machine, path)?.classList.add("mqg-selected");
  document.body.dataset.countsVersion = String(Number(document.body.dataset.countsVersion ?? "0") + 1);
}

/** Entries per second into a state over the last RATE_WINDOW_MS, from the gateway's running totals. */
function rateOf(machine: string, path: string, now: number): number {
  const latest = samples[samples.length - 1];
  if (!latest) return 0;
  const from = [...samples].reverse().find((s) => s.at <= now - RATE_WINDOW_MS) ?? samples[0]!;
  const seconds = (now - from.at) / 1000;
  if (seconds <= 0) return 0;
  return ((latest.entered[machine]?.[path] ?? 0) - (from.entered[machine]?.[path] ?? 0)) / seconds;
}

function paintRates(): void {
  const now = Date.now();
  for (const v of views) {
    for (const path of v.states) {
      const cell = document.querySelector(`[data-testid="rate-${v.id}-${path}"]`);
      if (cell) {
        const r = rateOf(v.id, path, now);
        cell.textContent = r === 0 ? "0" : r < 10 ? r.toFixed(1) : String(Math.round(r));
      }
    }
  }
}

function timeOf(at: number): string {
  return new Date(at).toISOString().slice(11, 23);
}

function transitionRow(t: TransitionView, withActor: boolean): HTMLTableRowElement {
  const row = el("tr");
  row.append(el("td", {}, timeOf(t.at)));
  if (withActor) row.append(el("td", {}, t.machine), el("td", {}, t.actor));
  row.append(el("td", {}, t.event), el("td", {}, t.from || "(start)"), el("td", {}, t.to || "(gone)"));
  return row;
}

function addToFeed(list: readonly TransitionView[], skipped: number): void {
  const body = document.querySelector("#feed tbody")!;
  for (const t of list) body.prepend(transitionRow(t, true));
  if (skipped > 0) body.prepend(el("tr", {}, `… ${skipped} more transitions not shown`));
  while (body.children.length > FEED_ROWS) body.lastElementChild!.remove();
}

function paintSelected(): void {
  const out = document.getElementById("drill-result")!;
  out.replaceChildren();
  if (!selected) return;
  const s = selected;
  const gone = s.state === "";
  const summary = el("table", { "data-testid": "drill-summary" });
  const rows: Array<[string, string, string?]> = [
    ["actor", s.id, "drill-actor"],
    ["machine", s.machine, "drill-machine"],
    ["state", gone ? "(gone)" : s.state, "drill-state"],
    ...Object.entries(s.client ?? {}).map(([k, v]): [string, string] => [k, String(v)]),
  ];
  if (s.others?.length) rows.push(["also", `cids ${s.others.join(", ")} share this client id`]);
  for (const [k, v, testid] of rows) {
    const row = el("tr");
    row.append(el("th", {}, k), el("td", testid ? { "data-testid": testid } : {}, v));
    summary.append(row);
  }
  const history = el("table", { "data-testid": "drill-transitions" });
  history.append(headRow(["time", "event", "from", "to"]));
  const body = el("tbody");
  for (const t of s.recent) body.append(transitionRow(t, false));
  history.append(body);
  out.append(summary, el("h3", {}, "Its recent transitions"), history);
  paintCounts();
}

async function drill(query: string): Promise<void> {
  const out = document.getElementById("drill-result")!;
  const res = await fetch(`/statecharts/actor?q=${encodeURIComponent(query)}`);
  const body = (await res.json()) as ActorView | { error: string };
  if ("error" in body) {
    selected = undefined;
    out.replaceChildren(el("p", { class: "error", "data-testid": "drill-error" }, body.error));
    paintCounts();
    return;
  }
  selected = body;
  paintSelected();
}

function follow(): void {
  const status = document.getElementById("status")!;
  const events = new EventSource("/statecharts/events");
  events.onopen = () => {
    status.dataset.connected = "true";
    status.textContent = "live";
  };
  events.onerror = () => {
    status.dataset.connected = "false";
    status.textContent = "reconnecting…";
  };
  events.addEventListener("counts", (e) => {
    counts = JSON.parse((e as MessageEvent<string>).data) as Counts;
    paintCounts();
  });
  events.addEventListener("entered", (e) => {
    const sample = JSON.parse((e as MessageEvent<string>).data) as EnteredSample;
    // The gateway's clock stamps the totals; the rates are read against the page's clock.
    samples.push({ at: Date.now(), entered: sample.entered });
    samples = samples.filter((s) => s.at > Date.now() - 6 * RATE_WINDOW_MS);
    paintRates();
  });
  events.addEventListener("transitions", (e) => {
    const { transitions, skipped } = JSON.parse((e as MessageEvent<string>).data) as {
      transitions: TransitionView[];
      skipped: number;
    };
    addToFeed(transitions, skipped);
    const mine = selected ? transitions.filter((t) => t.actor === selected!.id && t.machine === selected!.machine) : [];
    if (selected && mine.length > 0) {
      const recent = [...selected.recent, ...mine];
      selected = { ...selected, state: mine[mine.length - 1]!.to, recent };
      paintSelected();
    }
  });
}

function clientRow(c: ClientRow): HTMLTableRowElement {
  const row = el("tr", { "data-cid": String(c.cid) });
  // Times of day (UTC) in the cells, the whole timestamp on hover.
  const time = (iso: string | null) => el("td", iso ? { title: iso } : {}, iso ? iso.slice(11, 19) : "");
  for (const text of [String(c.cid), c.protocol, c.client_id, c.account, c.remote]) row.append(el("td", {}, text));
  // One line per parallel region: `serving.nats.online | serving.keepalive.waiting` is two.
  row.append(el("td", { class: "state" }, c.state.split(" | ").join("\n")), time(c.state_since), time(c.since));
  row.addEventListener("click", () => void drill(String(c.cid)));
  return row;
}

async function pollClients(): Promise<void> {
  try {
    const res = await fetch(`/clients?limit=${CLIENTS_SHOWN}`);
    const page = (await res.json()) as { total: number; clients: ClientRow[] };
    const filter = (document.getElementById("clients-filter") as HTMLInputElement).value.trim().toLowerCase();
    const shown = page.clients.filter(
      (c) => !filter || [c.client_id, c.account, c.state, c.remote].some((f) => f.toLowerCase().includes(filter)),
    );
    document.querySelector("#clients tbody")!.replaceChildren(...shown.map(clientRow));
    document.getElementById("clients-total")!.textContent =
      page.total > page.clients.length ? `(${page.total}, first ${page.clients.length} shown)` : `(${page.total})`;
  } catch {
    // The gateway is away for a moment: the table stays as it was and the next poll tries again.
  }
  paintRates();
  setTimeout(() => void pollClients(), CLIENTS_POLL_MS);
}

buildSections();
follow();
void pollClients();
document.getElementById("drill-form")!.addEventListener("submit", (e) => {
  e.preventDefault();
  const q = (document.getElementById("drill-query") as HTMLInputElement).value.trim();
  if (q) void drill(q);
});
void drawCharts();
