import type { AnyStateMachine, AnyStateNode } from "xstate";
import { toMermaid } from "./mermaid.js";

/** What the live page knows of one machine: its chart and every state a count can name. */
export interface MachineView {
  readonly id: string;
  /** The same Mermaid text as docs/statecharts. */
  readonly chart: string;
  /** Every state node as a dotted path (`serving.online`), parents before children. */
  readonly states: readonly string[];
}

export function machineView(machine: AnyStateMachine): MachineView {
  const states: string[] = [];
  const walk = (node: AnyStateNode) => {
    for (const child of Object.values(node.states) as AnyStateNode[]) {
      states.push(child.path.join("."));
      walk(child);
    }
  };
  walk(machine.root);
  return { id: machine.id, chart: toMermaid(machine), states };
}

// `</script>` inside the embedded JSON would end the script element early.
const embedJson = (value: unknown) => JSON.stringify(value).replaceAll("<", "\\u003c");

/** The page itself: static markup, the machines as data, and the scripts that draw them. */
export function statechartsHtml(views: readonly MachineView[]): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mq-gateway: live statecharts</title>
<link rel="icon" href="data:,">
<style>
  /* Fits a 1400 px window without sideways scrolling: the charts scale to their column. */
  body { font-family: system-ui, sans-serif; margin: 0 1rem; color: #222; display: grid; grid-template-columns: minmax(0, 1fr) minmax(18rem, 28rem); grid-template-rows: auto auto 1fr; column-gap: 1.5rem; }
  header, nav { grid-column: 1 / 3; }
  main { grid-column: 1; }
  /* The drill-down and the feed stay in view while the charts scroll. */
  aside { grid-column: 2; grid-row: 3; position: sticky; top: 0; align-self: start; max-height: 100vh; overflow: auto; }
  header { display: flex; gap: 2rem; align-items: baseline; flex-wrap: wrap; }
  #status[data-connected="true"] { color: #176f2c; }
  #status[data-connected="false"] { color: #a33; }
  nav { display: flex; flex-wrap: wrap; column-gap: .8rem; }
  section.machine { border-top: 1px solid #ccc; padding-top: .5rem; margin-top: 1rem; }
  .machine-body { display: flex; gap: 2rem; align-items: flex-start; flex-wrap: wrap; }
  .chart { flex: 1 1 24rem; min-width: 0; }
  .chart svg { max-width: 100%; height: auto; }
  #clients { overflow-x: auto; }
  #clients table { width: 100%; }
  #clients td.state { white-space: pre-line; }
  td.rate { text-align: right; font-variant-numeric: tabular-nums; color: #555; }
  table { border-collapse: collapse; font-size: .9rem; }
  td, th { padding: .15rem .6rem; text-align: left; border-bottom: 1px solid #eee; }
  td.count { text-align: right; font-variant-numeric: tabular-nums; }
  tr.occupied td { background: #fff3c4; font-weight: 600; }
  .chart svg g.mqg-occupied rect, .chart svg g.mqg-occupied path.basic { fill: #ffe08a !important; }
  .chart svg g.mqg-selected rect, .chart svg g.mqg-selected path.basic { stroke: #c0392b !important; stroke-width: 3px !important; }
  #drill form { display: flex; gap: .5rem; }
  #drill .error { color: #a33; }
  aside table { width: 100%; font-size: .8rem; table-layout: fixed; }
  aside td, aside th { overflow-wrap: anywhere; }
  #feed th:first-child { width: 7.5em; }
  #feed td:first-child { overflow-wrap: normal; }
  code { font-size: .85rem; }
</style>
</head>
<body>
<header>
  <h1>Live statecharts</h1>
  <span id="status" data-connected="false">connecting…</span>
</header>
<nav>${views.map((v) => `<a href="#machine-${v.id}">${v.id}</a>`).join("")}</nav>
<main>
<section id="clients">
  <h2>Clients <span id="clients-total" data-testid="clients-total"></span></h2>
  <input id="clients-filter" placeholder="filter: client id, account, state" autocomplete="off" size="32">
  <table data-testid="clients"><thead><tr><th>cid</th><th>protocol</th><th>client id</th><th>account</th><th>remote</th><th>state</th><th>in state since</th><th>connected since</th></tr></thead><tbody></tbody></table>
</section>
<div id="machines"></div>
</main>
<aside>
<section id="drill">
  <h2>One client's actor</h2>
  <form id="drill-form">
    <input id="drill-query" name="q" placeholder="client id, cid or actor id" autocomplete="off" size="32">
    <button type="submit">Show</button>
  </form>
  <div id="drill-result"></div>
</section>
<section>
  <h2>All recent transitions</h2>
  <table id="feed"><thead><tr><th>time</th><th>machine</th><th>actor</th><th>event</th><th>from</th><th>to</th></tr></thead><tbody></tbody></table>
</section>
</aside>
<script id="machine-data" type="application/json">${embedJson(views)}</script>
<script src="/statecharts/mermaid.min.js"></script>
<script type="module" src="/statecharts/page.js"></script>
</body>
</html>
`;
}
