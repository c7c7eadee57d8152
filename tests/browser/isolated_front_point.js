// The screen position of the front point of technique `label` farthest from any other design's
// point on the design-space chart (so a click there can only mean that design).
(label) => {
  const gd = document.getElementById("design-chart");
  const { xaxis, yaxis, _size: size } = gd._fullLayout;
  const box = gd.getBoundingClientRect();
  const at = (x, y) => [
    box.left + size.l + xaxis.l2p(xaxis.c2l(x)),
    box.top + size.t + yaxis.l2p(yaxis.c2l(y)),
  ];
  const points = [];
  for (const t of gd.data) {
    if (t.visible === false || !t.customdata) continue;
    t.x.forEach((x, i) => points.push([...at(x, t.y[i]), t.customdata[i]]));
  }
  const front = gd.data.find((t) => t.meta && t.meta.label === label && t.meta.front);
  const margin = 8;
  let best = null;
  front.x.forEach((x, i) => {
    const [u, v] = at(x, front.y[i]);
    const inside = u > box.left + size.l + margin && u < box.left + size.l + size.w - margin
      && v > box.top + size.t + margin && v < box.top + size.t + size.h - margin;
    if (!inside) return;
    let gap = Infinity;
    for (const [a, b, index] of points) {
      if (index !== front.customdata[i]) gap = Math.min(gap, Math.hypot(a - u, b - v));
    }
    if (!best || gap > best.gap) best = { x: u, y: v, index: front.customdata[i], gap };
  });
  return best;
}
