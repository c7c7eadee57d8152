// How many pixels of a PNG (base64) are near each colour ("#rrggbb"): within 40 summed over
// the three channels.
async ([png, colours]) => {
  const image = new Image();
  image.src = `data:image/png;base64,${png}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const { data } = context.getImageData(0, 0, image.width, image.height);
  const rgb = colours.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
  const counts = rgb.map(() => 0);
  for (let i = 0; i < data.length; i += 4) {
    rgb.forEach(([r, g, b], k) => {
      const distance = Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b);
      if (distance <= 40) counts[k] += 1;
    });
  }
  return counts;
}
