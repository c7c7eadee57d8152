// Pairs of visible SVG text labels of one chart card whose boxes overlap (by more than 1 px).
(chart) => {
  const card = document.querySelector(`.chart-card[data-chart="${chart}"]`);
  const texts = [...card.querySelectorAll("svg text")].filter((node) => {
    if (!node.textContent.trim()) return false;
    const style = getComputedStyle(node);
    if (style.display === "none" || style.visibility === "hidden" || Number(style.opacity) === 0) return false;
    for (let p = node.parentElement; p && p !== card; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.display === "none" || Number(s.opacity) === 0) return false;
    }
    const box = node.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  });
  const boxes = texts.map((node) => ({ text: node.textContent.trim(), box: node.getBoundingClientRect() }));
  const clashes = [];
  for (let i = 0; i < boxes.length; i += 1) {
    for (let j = i + 1; j < boxes.length; j += 1) {
      const a = boxes[i].box, b = boxes[j].box;
      const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (x > 1 && y > 1) clashes.push(`${boxes[i].text} / ${boxes[j].text}`);
    }
  }
  return { count: boxes.length, clashes };
}
