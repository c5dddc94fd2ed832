// Pan and zoom of the live page's charts (run by the browser, served as /statecharts/panZoom.js):
// the wheel zooms around the pointer, a drag pans, a click (a press that did not move) picks
// the state under it; the toolbar's buttons zoom, show natural size, or fit the whole chart.

/** Below this scale a 15 px state name is under 11 px: "Fit" may go there, a first view does not. */
const READABLE = 0.8;

interface View {
  readonly k: number;
  readonly x: number;
  readonly y: number;
}

export class PanZoom {
  private readonly views = new Map<string, View>();
  private current = "";
  private drag: { x: number; y: number; moved: boolean } | undefined;

  constructor(
    private readonly viewport: HTMLElement,
    private readonly chartOf: (machine: string) => HTMLElement | null,
    private readonly pick: (statePath: string) => void,
  ) {
    viewport.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    viewport.addEventListener("pointerdown", (e) => {
      if (e.button === 0) this.drag = { x: e.clientX, y: e.clientY, moved: false };
    });
    viewport.addEventListener("pointermove", (e) => this.move(e));
    viewport.addEventListener("pointerup", (e) => this.end(e, true));
    viewport.addEventListener("pointercancel", (e) => this.end(e, false));
    const middle = () => [viewport.clientWidth / 2, viewport.clientHeight / 2] as const;
    const on = (id: string, f: () => void) => document.getElementById(id)?.addEventListener("click", f);
    on("zoom-in", () => this.zoomAt(1.25, ...middle()));
    on("zoom-out", () => this.zoomAt(0.8, ...middle()));
    on("fit", () => this.fit(0));
    on("actual", () => this.zoomAt(1 / this.view().k, ...middle()));
  }

  /** Shows a machine's chart as it was last seen; the first time, at natural size or fitted, never below READABLE. */
  show(machine: string): void {
    this.current = machine;
    if (this.views.has(machine)) this.apply();
    else this.fit(READABLE);
  }

  /** Moves the chart (not its scale) so that this part of it is in the middle of the view. */
  centre(part: SVGGraphicsElement): void {
    const b = part.getBBox();
    const v = this.view();
    const x = this.viewport.clientWidth / 2 - (b.x + b.width / 2) * v.k;
    const y = this.viewport.clientHeight / 2 - (b.y + b.height / 2) * v.k;
    this.views.set(this.current, { ...v, x, y });
    this.apply();
  }

  private view(): View {
    return this.views.get(this.current) ?? { k: 1, x: 0, y: 0 };
  }

  private apply(): void {
    const v = this.view();
    const chart = this.chartOf(this.current);
    if (chart) chart.style.transform = `translate(${v.x}px, ${v.y}px) scale(${v.k})`;
    const level = document.getElementById("zoom-level");
    if (level) level.textContent = `${Math.round(v.k * 100)}%`;
  }

  /** The whole chart in view, centred, at a scale of at least `min` (then its top left shows). */
  private fit(min: number): void {
    const svg = this.chartOf(this.current)?.querySelector("svg");
    const w = Number(svg?.getAttribute("width") ?? 1);
    const h = Number(svg?.getAttribute("height") ?? 1);
    const vw = this.viewport.clientWidth;
    const vh = this.viewport.clientHeight;
    const k = Math.max(min, Math.min(1.5, (vw - 16) / w, (vh - 16) / h));
    this.views.set(this.current, { k, x: Math.max(8, (vw - w * k) / 2), y: Math.max(8, (vh - h * k) / 2) });
    this.apply();
  }

  private zoomAt(factor: number, cx: number, cy: number): void {
    const v = this.view();
    const k = Math.min(4, Math.max(0.1, v.k * factor));
    this.views.set(this.current, { k, x: cx - ((cx - v.x) * k) / v.k, y: cy - ((cy - v.y) * k) / v.k });
    this.apply();
  }

  private wheel(e: WheelEvent): void {
    e.preventDefault();
    const r = this.viewport.getBoundingClientRect();
    this.zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }

  private move(e: PointerEvent): void {
    const d = this.drag;
    if (!d) return;
    const dx = e.clientX - d.x;
    const dy = e.clientY - d.y;
    if (!d.moved && Math.hypot(dx, dy) < 4) return;
    if (!d.moved) this.viewport.setPointerCapture(e.pointerId);
    d.moved = true;
    this.viewport.classList.add("dragging");
    const v = this.view();
    this.views.set(this.current, { ...v, x: v.x + dx, y: v.y + dy });
    d.x = e.clientX;
    d.y = e.clientY;
    this.apply();
  }

  private end(e: PointerEvent, up: boolean): void {
    const dragged = this.drag?.moved;
    this.drag = undefined;
    this.viewport.classList.remove("dragging");
    if (dragged || !up) return;
    const g = (e.target as Element).closest?.("g.state[data-state]:not(.initial)");
    if (g) this.pick(g.getAttribute("data-state") ?? "");
  }
}
