import { type ChartLayout, type EdgeLine, LABEL_FONT, STATE_FONT, type StateBox } from "./layout.js";

/**
 * A laid-out machine as one standalone SVG: readable in docs/ as it is (colours are
 * attributes, not a stylesheet), and marked for the live page, which lights states by
 * `data-state` and a client's path by each edge's `data-from`/`data-to`/`data-events`.
 */
export function chartSvg(chart: ChartLayout): string {
  const marker = `arrow-${chart.id}`;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="statechart" data-machine="${esc(chart.id)}" width="${chart.width}" height="${chart.height}" viewBox="0 0 ${chart.width} ${chart.height}" font-family="${FONT}" role="img" aria-label="state chart of ${esc(chart.id)}">`,
    `<defs><marker id="${marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#6b778c"/></marker></defs>`,
    `<rect class="background" width="${chart.width}" height="${chart.height}" fill="#ffffff"/>`,
  ];
  // Parents before children (the layout lists them so): inner boxes are painted over outer ones.
  for (const s of chart.states) out.push(stateBox(s));
  for (const e of chart.edges) out.push(edgeLine(e, marker));
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}

const FONT = "DejaVu Sans Mono, Menlo, Consolas, ui-monospace, monospace";

const esc = (s: string) =>
  s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");
const n = (v: number) => String(Math.round(v * 10) / 10);

function stateBox(s: StateBox): string {
  const at = `x="${n(s.x)}" y="${n(s.y)}" width="${n(s.width)}" height="${n(s.height)}"`;
  const open = `<g class="state ${s.kind}" data-state="${esc(s.path)}">`;
  if (s.kind === "initial") {
    return `${open}<circle cx="${n(s.x + s.width / 2)}" cy="${n(s.y + s.height / 2)}" r="${n(s.width / 2)}" fill="#34495e"/></g>`;
  }
  const title = `<title>${esc(s.path || "any state: a transition on the machine itself")}</title>`;
  if (s.kind === "compound" || s.kind === "parallel" || s.kind === "region") {
    const dashed = s.kind === "region" ? ' stroke-dasharray="6 4"' : "";
    const fill = s.kind === "region" ? "#ffffff" : "#f3f5f9";
    return `${open}${title}<rect class="box" ${at} rx="12" fill="${fill}" stroke="#8792a6" stroke-width="1.5"${dashed}/><text class="state-name" x="${n(s.x + 14)}" y="${n(s.y + STATE_FONT + 9)}" font-size="${STATE_FONT}" font-weight="bold" fill="#1f2d3d">${esc(s.name)}</text></g>`;
  }
  const dashed = s.kind === "any" ? ' stroke-dasharray="5 4"' : "";
  const inner =
    s.kind === "final"
      ? `<rect x="${n(s.x + 3)}" y="${n(s.y + 3)}" width="${n(s.width - 6)}" height="${n(s.height - 6)}" rx="6" fill="none" stroke="#44546a" stroke-width="1"/>`
      : "";
  return `${open}${title}<rect class="box" ${at} rx="8" fill="#ffffff" stroke="#44546a" stroke-width="1.5"${dashed}/>${inner}<text class="state-name" x="${n(s.x + s.width / 2)}" y="${n(s.y + s.height / 2 + STATE_FONT * 0.35)}" text-anchor="middle" font-size="${STATE_FONT}" fill="#1f2d3d">${esc(s.name)}</text></g>`;
}

function edgeLine(e: EdgeLine, marker: string): string {
  const d = e.points.map(([x, y], i) => `${i === 0 ? "M" : "L"}${n(x)},${n(y)}`).join("");
  const labels = e.labelBoxes
    .map((l) => {
      const lines = l.text.split("\n");
      const spans = lines
        .map((t, i) => `<tspan x="${n(l.x + 3)}" y="${n(l.y + (i + 1) * LABEL_FONT * 1.35 - 2)}">${esc(t)}</tspan>`)
        .join("");
      // A white halo keeps a label readable where it crosses a line.
      return `<text class="edge-label" font-size="${LABEL_FONT}" fill="#3d4a5c" stroke="#ffffff" stroke-width="3" paint-order="stroke">${spans}</text>`;
    })
    .join("");
  return `<g class="edge" data-from="${esc(e.from)}" data-to="${esc(e.to)}" data-events="${esc(e.events.join(" "))}"><path d="${d}" fill="none" stroke="#6b778c" stroke-width="1.4" marker-end="url(#${marker})"/>${labels}</g>`;
}
