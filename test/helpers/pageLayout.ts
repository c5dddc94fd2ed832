// Checks of the live statecharts page run inside the browser (page.evaluate): each
// function stands alone, since Playwright sends its source text, not its closure.

/** The rendered heights of one machine's state names (getBoundingClientRect, so zoom counts). */
export const legibility = (machine: string): { names: number; smallest: number; largest: number } => {
  const heights = [...document.querySelectorAll(`#chart-${machine} svg .state-name`)].map(
    (t) => t.getBoundingClientRect().height,
  );
  return { names: heights.length, smallest: Math.min(...heights), largest: Math.max(...heights) };
};

/**
 * What does not fit a window `width` px wide: the page's scroll width, elements past its
 * right edge (the charts' pannable canvas aside), tables that scroll sideways, and words
 * of tables and tabs that a line break cuts in two.
 */
export const overflowAt = (width: number) => {
  const viewport = document.getElementById("viewport");
  const wide = [...document.querySelectorAll("body *")]
    .filter((e) => !viewport?.contains(e) && e.getBoundingClientRect().right > width + 0.5)
    .slice(0, 8)
    .map(
      (e) =>
        `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)} ${(e.textContent ?? "").slice(0, 40)}`,
    );
  const scrolled = [...document.querySelectorAll(".wide, aside, #workspace")]
    .filter((e) => e.scrollWidth > e.clientWidth + 1)
    .map((e) => e.id || e.className);
  const brokenWords: string[] = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement?.closest("td, th, #tabs button, h1, h2, h3")) continue;
    const text = node.textContent ?? "";
    const re = /\S+/g;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (tops.size > 1) brokenWords.push(m[0]);
    }
  }
  return { page: document.documentElement.scrollWidth, wide, scrolled, brokenWords: brokenWords.slice(0, 10) };
};
