import type { AnyStateMachine, AnyStateNode } from "xstate";

/** What the live page knows of one machine: every state a count can name, and its drawing. */
export interface MachineView {
  readonly id: string;
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
  return { id: machine.id, states };
}

// `</script>` inside the embedded JSON would end the script element early.
const embedJson = (value: unknown) => JSON.stringify(value).replaceAll("<", "\\u003c");

/**
 * The page itself: static markup with every machine's drawing inline (docs/statecharts/*.svg,
 * laid out when they were generated), the machines as data, and the one small script that
 * pans, zooms and lights them. `svgOf` answers a placeholder for a drawing that is missing.
 */
export function statechartsHtml(views: readonly MachineView[], svgOf: (id: string) => string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mq-gateway: live state charts</title>
<link rel="icon" href="data:,">
<style>
  * { box-sizing: border-box; }
  body { font-family: system-ui, sans-serif; margin: 0 1rem 2rem; color: #1f2d3d; font-size: 15px; }
  header { display: flex; gap: 1.5rem; align-items: baseline; flex-wrap: wrap; }
  h1 { font-size: 1.4rem; margin: .6rem 0 .3rem; }
  h2 { font-size: 1.1rem; margin: .8rem 0 .4rem; }
  #status[data-connected="true"] { color: #176f2c; }
  #status[data-connected="false"] { color: #a33; }
  #tabs { display: flex; flex-wrap: wrap; gap: .3rem; margin: .3rem 0 .5rem; }
  #tabs button { white-space: nowrap; border: 1px solid #c5ccd8; background: #f6f7fa; border-radius: 6px; padding: .25rem .55rem; font: inherit; font-size: .9rem; cursor: pointer; }
  #tabs button[aria-selected="true"] { background: #1f2d3d; color: #fff; border-color: #1f2d3d; }
  #tabs .total { margin-left: .35rem; font-variant-numeric: tabular-nums; color: #8a5a00; font-weight: 600; }
  #tabs button[aria-selected="true"] .total { color: #ffd66b; }
  #tabs .total:empty { display: none; }
  #workspace { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 20rem); gap: 1rem; align-items: start; }
  .toolbar { display: flex; gap: .4rem; align-items: center; flex-wrap: wrap; margin-bottom: .3rem; }
  .toolbar h2 { margin: 0 auto 0 0; }
  .toolbar button { font: inherit; font-size: .9rem; padding: .15rem .6rem; }
  #zoom-level { font-variant-numeric: tabular-nums; color: #555; min-width: 3.5em; text-align: right; }
  #viewport { position: relative; overflow: hidden; height: max(22rem, calc(100vh - 10rem)); border: 1px solid #c5ccd8; border-radius: 6px; background: #fff; cursor: grab; touch-action: none; user-select: none; }
  #viewport.dragging { cursor: grabbing; }
  .chart { position: absolute; left: 0; top: 0; transform-origin: 0 0; }
  .chart[hidden] { display: none; }
  .chart svg { display: block; }
  .statechart g.state:not(.initial) { cursor: pointer; }
  .statechart g.state.occupied > rect.box { fill: #fff1c2; }
  .statechart g.state.atomic.occupied > rect.box, .statechart g.state.final.occupied > rect.box { fill: #ffd66b; }
  .statechart g.state.picked > rect.box { stroke: #1b5fc1; stroke-width: 3; }
  .statechart g.state.visited > rect.box { stroke: #c0392b; stroke-width: 2.5; }
  .statechart g.state.current > rect.box { stroke: #c0392b; stroke-width: 4; }
  .statechart g.edge.on-path path { stroke: #c0392b; stroke-width: 3; }
  .statechart g.edge.on-path text { fill: #c0392b; font-weight: bold; }
  .statechart .badge rect { fill: #b34700; }
  .statechart .badge text { fill: #fff; font: bold 12px system-ui, sans-serif; }
  .statechart .step { fill: #c0392b; font: bold 12px system-ui, sans-serif; }
  aside { min-width: 0; }
  aside section { border: 1px solid #e1e5ec; border-radius: 6px; padding: 0 .7rem .6rem; margin-bottom: .8rem; }
  table { border-collapse: collapse; font-size: .85rem; width: 100%; }
  td, th { padding: .15rem .4rem; text-align: left; border-bottom: 1px solid #eee; vertical-align: top; }
  /* Lines break between words and after dots of a state path (<wbr>), never inside a name. */
  td, th { overflow-wrap: normal; word-break: normal; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  tr.pickable { cursor: pointer; }
  tr.pickable:hover td { background: #eef3fb; }
  tr.occupied td { background: #fff6d6; font-weight: 600; }
  #path-form { display: flex; gap: .4rem; }
  #path-form input { flex: 1; min-width: 0; }
  .error, .hint { color: #666; font-size: .85rem; }
  .error { color: #a33; }
  .wide { overflow-x: auto; }
  code { font-size: .85rem; }
</style>
</head>
<body>
<header>
  <h1>Live state charts</h1>
  <span id="status" data-connected="false">connecting…</span>
  <span class="hint">drag to pan, wheel to zoom, click a state for its clients</span>
</header>
<nav id="tabs" role="tablist">${views
    .map(
      (v) =>
        `<button type="button" role="tab" data-machine="${v.id}" aria-selected="false">${v.id}<span class="total" data-testid="total-${v.id}"></span></button>`,
    )
    .join("")}</nav>
<div id="workspace">
<section id="viewer">
  <div class="toolbar">
    <h2 id="machine-title"></h2>
    <button type="button" id="zoom-out" title="zoom out">−</button>
    <span id="zoom-level">100%</span>
    <button type="button" id="zoom-in" title="zoom in">+</button>
    <button type="button" id="actual" title="natural size">1:1</button>
    <button type="button" id="fit" title="the whole chart in view">Fit</button>
  </div>
  <div id="viewport">
${views.map((v) => `<div class="chart" id="chart-${v.id}" data-machine="${v.id}" hidden>${svgOf(v.id)}</div>`).join("\n")}
  </div>
</section>
<aside>
<section id="state-panel">
  <h2>State <span id="state-title"></span></h2>
  <div id="state-result"><p class="hint">Click a state on the chart (or a row below) to list who is in it.</p></div>
  <table data-testid="state-counts"><thead><tr><th>state</th><th class="num">now</th><th class="num">in/s</th></tr></thead><tbody></tbody></table>
</section>
<section id="path-panel">
  <h2>One client's path</h2>
  <form id="path-form">
    <input id="path-query" name="q" placeholder="client id, cid or actor id" autocomplete="off">
    <button type="submit">Show</button>
  </form>
  <div id="path-result"></div>
</section>
</aside>
</div>
<section id="clients">
  <h2>Clients <span id="clients-total" data-testid="clients-total"></span></h2>
  <input id="clients-filter" placeholder="filter: client id, account, state" autocomplete="off" size="32">
  <div class="wide"><table data-testid="clients"><thead><tr><th>cid</th><th>protocol</th><th>client id</th><th>account</th><th>remote</th><th>state</th><th>in state since</th><th>connected since</th></tr></thead><tbody></tbody></table></div>
</section>
<section id="feed-section">
  <h2>Recent transitions</h2>
  <div class="wide"><table id="feed"><thead><tr><th>time</th><th>machine</th><th>actor</th><th>event</th><th>from</th><th>to</th></tr></thead><tbody></tbody></table></div>
</section>
<script id="machine-data" type="application/json">${embedJson(views)}</script>
<script type="module" src="/statecharts/page.js"></script>
</body>
</html>
`;
}
