// The live state charts page's script, run by the browser (served as /statecharts/page.js).
// The drawings come with the page (laid out by ELK when they were generated); this script
// only pans and zooms them, lights states by the gateway's live counts, lists who is in a
// clicked state and draws one client's recent path. No framework, no drawing library.
import type { MachineView } from "./page.js";
import { PanZoom } from "./panZoom.js";
import { type Counts, countIn, type EdgeRef, edgesTaken, leaves, type TransitionView } from "./paths.js";

interface ActorView {
  readonly machine: string;
  readonly id: string;
  readonly state: string;
  readonly recent: TransitionView[];
  readonly client?: Record<string, unknown>;
  readonly others?: number[];
  readonly gateway?: string;
  /** The client's other machines (its MQTT session). */
  readonly related?: ActorView[];
}

interface ClientRow {
  readonly cid: number;
  readonly protocol: string;
  readonly client_id: string;
  readonly account: string;
  readonly remote: string;
  readonly since: string;
  readonly state: string;
  readonly state_since: string | null;
  readonly gateway?: string;
}

interface InState {
  readonly total: number;
  readonly actors: Array<{
    id: string;
    state: string;
    since: number | null;
    client?: Record<string, unknown>;
    gateway?: string;
  }>;
}

/** Entries into each state so far, as the gateway counts them, and when the page heard it. */
interface EnteredSample {
  readonly at: number;
  readonly entered: Counts;
}
const RATE_WINDOW_MS = 10_000;
const CLIENTS_SHOWN = 200;
const CLIENTS_POLL_MS = 2_000;
const FEED_ROWS = 50;
const SVG = "http://www.w3.org/2000/svg";

const views = JSON.parse(document.getElementById("machine-data")!.textContent!) as MachineView[];
let counts: Counts = {};
let samples: EnteredSample[] = [];
let current = "";
let picked: { machine: string; path: string } | undefined;
let followed: ActorView | undefined;
const viewport = document.getElementById("viewport")!;

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

/** A state path or configuration as a cell's text: lines may break after each dot, not inside names. */
function pathText(text: string): HTMLElement {
  const span = el("span");
  text.split(/(?<=[.|])/).forEach((part, i) => {
    if (i > 0) span.append(el("wbr"));
    span.append(part);
  });
  return span;
}

function cell(content: string | Node, attrs: Record<string, string> = {}): HTMLTableCellElement {
  const td = el("td", attrs);
  td.append(content);
  return td;
}

const chartOf = (machine: string) => document.getElementById(`chart-${machine}`);
const zoom = new PanZoom(viewport, chartOf, (path) => void pickState(current, path));
const stateNodes = (machine: string) =>
  chartOf(machine)?.querySelectorAll<SVGGElement>("g.state[data-state]:not(.initial)") ??
  ([] as unknown as NodeListOf<SVGGElement>);

// ---- machines -----------------------------------------------------------------------

function show(machine: string): void {
  if (!views.some((v) => v.id === machine)) machine = views[0]!.id;
  current = machine;
  for (const b of document.querySelectorAll<HTMLButtonElement>("#tabs button"))
    b.setAttribute("aria-selected", String(b.dataset.machine === machine));
  for (const c of document.querySelectorAll<HTMLElement>(".chart")) c.hidden = c.dataset.machine !== machine;
  document.getElementById("machine-title")!.textContent = machine;
  zoom.show(machine);
  if (location.hash !== `#${machine}`) history.replaceState(null, "", `#${machine}`);
  paintStateTable();
}

function badgeOf(g: SVGGElement): SVGGElement {
  let badge = g.querySelector<SVGGElement>(":scope > g.badge");
  if (badge) return badge;
  const box = g.querySelector("rect.box")!;
  const x = Number(box.getAttribute("x")) + Number(box.getAttribute("width"));
  const y = Number(box.getAttribute("y"));
  badge = document.createElementNS(SVG, "g");
  badge.setAttribute("class", "badge");
  badge.setAttribute("transform", `translate(${x} ${y})`);
  const rect = document.createElementNS(SVG, "rect");
  rect.setAttribute("y", "-10");
  rect.setAttribute("height", "20");
  rect.setAttribute("rx", "10");
  const text = document.createElementNS(SVG, "text");
  text.setAttribute("y", "4.5");
  text.setAttribute("text-anchor", "middle");
  badge.append(rect, text);
  g.append(badge);
  return badge;
}

function paintCounts(): void {
  for (const v of views) {
    let total = 0;
    for (const n of Object.values(counts[v.id] ?? {})) total += n;
    document.querySelector(`[data-testid="total-${v.id}"]`)!.textContent = total > 0 ? String(total) : "";
    for (const g of stateNodes(v.id)) {
      const path = g.dataset.state ?? "";
      const n = path === "" ? 0 : countIn(counts, v.id, path);
      g.classList.toggle("occupied", n > 0);
      const had = g.querySelector(":scope > g.badge");
      if (n === 0 && !had) continue;
      const badge = badgeOf(g);
      badge.style.display = n > 0 ? "" : "none";
      const label = String(n);
      const w = 12 + label.length * 7.5;
      const rect = badge.querySelector("rect")!;
      rect.setAttribute("x", String(-w / 2 - 4));
      rect.setAttribute("width", String(w));
      const text = badge.querySelector("text")!;
      text.setAttribute("x", "-4");
      text.textContent = label;
      text.setAttribute("data-testid", `count-${v.id}-${path}`);
    }
  }
  paintStateTable();
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

function paintStateTable(): void {
  const v = views.find((x) => x.id === current);
  if (!v) return;
  const now = Date.now();
  const rows = v.states.map((path) => {
    const n = countIn(counts, v.id, path);
    const r = rateOf(v.id, path, now);
    const row = el("tr", { class: `pickable${n > 0 ? " occupied" : ""}`, "data-state": path });
    const depth = path.split(".").length - 1;
    row.append(
      cell(path.split(".").pop()!, { style: `padding-left:${0.4 + depth * 0.8}rem` }),
      cell(String(n), { class: "num", "data-testid": `now-${v.id}-${path}` }),
      cell(r === 0 ? "0" : r < 10 ? r.toFixed(1) : String(Math.round(r)), {
        class: "num",
        "data-testid": `rate-${v.id}-${path}`,
      }),
    );
    row.addEventListener("click", () => pickState(v.id, path));
    return row;
  });
  document.querySelector('[data-testid="state-counts"] tbody')!.replaceChildren(...rows);
}

// ---- who is in a state --------------------------------------------------------------

/** The list of a picked state follows its machine's transitions, asked again at most once a second. */
let refreshing: ReturnType<typeof setTimeout> | undefined;
function refreshPicked(): void {
  if (refreshing !== undefined) return;
  refreshing = setTimeout(() => {
    refreshing = undefined;
    if (picked) void pickState(picked.machine, picked.path);
  }, 1_000);
}

async function pickState(machine: string, path: string): Promise<void> {
  picked = { machine, path };
  for (const g of document.querySelectorAll(".picked")) g.classList.remove("picked");
  chartOf(machine)
    ?.querySelector(`g.state[data-state="${CSS.escape(path)}"]`)
    ?.classList.add("picked");
  document.getElementById("state-title")!.textContent = path === "" ? "" : path;
  const out = document.getElementById("state-result")!;
  if (path === "") {
    out.replaceChildren(el("p", { class: "hint" }, "Transitions from here apply in every state of the machine."));
    return;
  }
  const res = await fetch(
    `/statecharts/state?machine=${encodeURIComponent(machine)}&state=${encodeURIComponent(path)}`,
  );
  const body = (await res.json()) as InState | { error: string };
  if (picked?.machine !== machine || picked.path !== path) return;
  if ("error" in body) {
    out.replaceChildren(el("p", { class: "error" }, body.error));
    return;
  }
  if (body.total === 0) {
    out.replaceChildren(
      el("p", { class: "hint", "data-testid": "state-empty" }, `No ${machine} actor is in ${path} now.`),
    );
    return;
  }
  const table = el("table", { "data-testid": "state-actors" });
  table.append(el("thead"));
  table.tHead!.append(el("tr"));
  table.tHead!.rows[0]!.append(el("th", {}, "client / actor"), el("th", {}, "state"));
  const tbody = el("tbody");
  for (const a of body.actors) {
    const who = a.client
      ? `${String(a.client.client_id)} (${String(a.client.protocol)} ${String(a.client.cid)})`
      : a.id;
    const row = el("tr", { class: "pickable", "data-actor": a.id });
    row.append(cell(who + (a.gateway ? ` @${a.gateway}` : "")), cell(pathText(a.state)));
    row.addEventListener("click", () => void follow(a.gateway ? `${a.gateway}/${a.id}` : a.id));
    tbody.append(row);
  }
  table.append(tbody);
  const more =
    body.total > body.actors.length
      ? [el("p", { class: "hint" }, `${body.total} in all, first ${body.actors.length} shown`)]
      : [];
  out.replaceChildren(table, ...more);
}

// ---- one client's path --------------------------------------------------------------

/** The arrows a client's recent transitions took (in order, each once, with its step numbers), the states it passed and the ones it is in. */
function pathOnChart(chart: HTMLElement, recent: readonly TransitionView[], state: string) {
  const gs = [...chart.querySelectorAll<SVGGElement>("g.edge")];
  const refs: EdgeRef[] = gs.map((g) => ({
    from: g.dataset.from ?? "",
    to: g.dataset.to ?? "",
    events: (g.dataset.events ?? "").split(" "),
  }));
  const steps = new Map<SVGGElement, number[]>();
  edgesTaken(refs, recent).forEach((arrows, step) => {
    for (const i of arrows) steps.set(gs[i]!, [...(steps.get(gs[i]!) ?? []), step + 1]);
  });
  const leafBox = (path: string) => chart.querySelector<SVGGElement>(`g.state[data-state="${CSS.escape(path)}"]`);
  const visited = recent
    .flatMap((t) => [...leaves(t.from), ...leaves(t.to)])
    .map(leafBox)
    .filter((g) => g !== null);
  const currentStates = leaves(state)
    .map(leafBox)
    .filter((g) => g !== null);
  return { steps, visited, currentStates };
}

function paintPath(): void {
  for (const e of document.querySelectorAll(".on-path, .visited, .current"))
    e.classList.remove("on-path", "visited", "current");
  for (const s of document.querySelectorAll(".statechart .step")) s.remove();
  const out = document.getElementById("path-result")!;
  if (!followed) return;
  const f = followed;
  for (const a of [f, ...(f.related ?? [])]) {
    const chart = chartOf(a.machine);
    if (!chart) continue;
    const { steps, visited, currentStates } = pathOnChart(chart, a.recent, a.state);
    steps.forEach((numbers, g) => {
      g.classList.add("on-path");
      // The step's number where the line starts, so the order can be read off the chart.
      const d = g.querySelector("path")?.getAttribute("d") ?? "";
      const m = /^M([\d.]+),([\d.]+)/.exec(d);
      if (!m) return;
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("class", "step");
      t.setAttribute("x", String(Number(m[1]) + 5));
      t.setAttribute("y", String(Number(m[2]) + 13));
      t.textContent = numbers.join(",");
      g.append(t);
    });
    for (const g of visited) g.classList.add("visited");
    for (const g of currentStates) g.classList.add("current");
  }
  const summary = el("table", { "data-testid": "path-summary" });
  const rows: Array<[string, string, string?]> = [
    ["actor", f.id, "path-actor"],
    ["machine", f.machine, "path-machine"],
    ["state", f.state === "" ? "(gone)" : f.state, "path-state"],
    ...(f.gateway ? [["gateway", f.gateway] as [string, string]] : []),
    // Times of day (UTC): a whole timestamp would not fit the column.
    ...Object.entries(f.client ?? {}).map(([k, v]): [string, string] => [
      k,
      k === "since" ? String(v).slice(11, 19) : String(v),
    ]),
  ];
  if (f.others?.length) rows.push(["also", `cids ${f.others.join(", ")} share this client id`]);
  for (const [k, v, testid] of rows) {
    const row = el("tr");
    row.append(el("th", {}, k), cell(pathText(v), testid ? { "data-testid": testid } : {}));
    summary.append(row);
  }
  out.replaceChildren(summary);
  for (const a of [f, ...(f.related ?? [])]) {
    const history = el("table", { "data-testid": `path-transitions-${a.machine}` });
    history.append(el("thead"));
    history.tHead!.append(el("tr"));
    history.tHead!.rows[0]!.append(el("th", {}, "#"), el("th", {}, "event"), el("th", {}, "to"));
    const body = el("tbody");
    a.recent.forEach((t, i) => {
      // The time on hover: four columns do not fit the side panel.
      const row = el("tr", { title: timeOf(t.at) });
      row.append(cell(String(i + 1)), cell(pathText(t.event)), cell(pathText(t.to || "(gone)")));
      body.append(row);
    });
    history.append(body);
    const open = el("button", { type: "button" }, `show ${a.machine}`);
    open.addEventListener("click", () => show(a.machine));
    const title = el("h3", {}, `${a.machine}, recent transitions `);
    title.append(open);
    out.append(title, history);
  }
}

async function follow(query: string): Promise<void> {
  const out = document.getElementById("path-result")!;
  (document.getElementById("path-query") as HTMLInputElement).value = query;
  const res = await fetch(`/statecharts/actor?q=${encodeURIComponent(query)}`);
  const body = (await res.json()) as ActorView | { error: string };
  if ("error" in body) {
    followed = undefined;
    paintPath();
    out.replaceChildren(el("p", { class: "error", "data-testid": "path-error" }, body.error));
    return;
  }
  followed = body;
  if (current !== body.machine) show(body.machine);
  paintPath();
  // Where the client is now, in the middle of the view.
  const here = chartOf(body.machine)?.querySelector<SVGGElement>("g.state.current");
  if (here) zoom.centre(here);
}

// ---- the live feed ------------------------------------------------------------------

const timeOf = (at: number) => new Date(at).toISOString().slice(11, 23);

function addToFeed(list: readonly TransitionView[], skipped: number): void {
  const body = document.querySelector("#feed tbody")!;
  for (const t of list) {
    const row = el("tr");
    row.append(
      cell(timeOf(t.at)),
      cell(t.machine),
      cell(t.actor),
      cell(pathText(t.event)),
      cell(pathText(t.from || "(start)")),
      cell(pathText(t.to || "(gone)")),
    );
    body.prepend(row);
  }
  if (skipped > 0) body.prepend(el("tr", {}, `… ${skipped} more transitions not shown`));
  while (body.children.length > FEED_ROWS) body.lastElementChild!.remove();
}

function listen(): void {
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
  });
  events.addEventListener("transitions", (e) => {
    const { transitions, skipped } = JSON.parse((e as MessageEvent<string>).data) as {
      transitions: TransitionView[];
      skipped: number;
    };
    addToFeed(transitions, skipped);
    if (followed) {
      let changed = false;
      const update = (a: ActorView): ActorView => {
        const mine = transitions.filter(
          (t) => t.machine === a.machine && (t.actor === a.id || t.actor === `${a.gateway}/${a.id}`),
        );
        if (mine.length === 0) return a;
        changed = true;
        return { ...a, state: mine[mine.length - 1]!.to, recent: [...a.recent, ...mine].slice(-16) };
      };
      const next = { ...update(followed), related: followed.related?.map(update) };
      if (changed) {
        followed = next;
        paintPath();
      }
    }
    if (picked && transitions.some((t) => t.machine === picked!.machine)) refreshPicked();
  });
}

function clientRow(c: ClientRow): HTMLTableRowElement {
  const row = el("tr", { class: "pickable", "data-cid": String(c.cid) });
  // Times of day (UTC) in the cells, the whole timestamp on hover.
  const time = (iso: string | null) => el("td", iso ? { title: iso } : {}, iso ? iso.slice(11, 19) : "");
  row.append(cell(c.gateway ? `${c.cid} @${c.gateway}` : String(c.cid)));
  for (const text of [c.protocol, c.client_id, c.account, c.remote]) row.append(cell(text));
  // One line per parallel region: `serving.nats.online | serving.keepalive.waiting` is two.
  row.append(cell(pathText(c.state)), time(c.state_since), time(c.since));
  row.addEventListener("click", () => void follow(c.gateway ? `${c.gateway}/${c.protocol}-${c.cid}` : String(c.cid)));
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
    document.querySelector('[data-testid="clients"] tbody')!.replaceChildren(...shown.map(clientRow));
    document.getElementById("clients-total")!.textContent =
      page.total > page.clients.length ? `(${page.total}, first ${page.clients.length} shown)` : `(${page.total})`;
  } catch {
    // The gateway is away for a moment: the table stays as it was and the next poll tries again.
  }
  paintStateTable();
  setTimeout(() => void pollClients(), CLIENTS_POLL_MS);
}

for (const b of document.querySelectorAll<HTMLButtonElement>("#tabs button"))
  b.addEventListener("click", () => show(b.dataset.machine!));
const wanted = decodeURIComponent(location.hash.slice(1));
show(
  views.some((v) => v.id === wanted)
    ? wanted
    : views.some((v) => v.id === "mqttConnection")
      ? "mqttConnection"
      : views[0]!.id,
);
paintCounts();
document.body.dataset.charts = "drawn";
document.body.dataset.firstRenderMs = String(Math.round(performance.now()));
listen();
void pollClients();
document.getElementById("path-form")!.addEventListener("submit", (e) => {
  e.preventDefault();
  const q = (document.getElementById("path-query") as HTMLInputElement).value.trim();
  if (q) void follow(q);
});
