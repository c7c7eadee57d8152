// The spec as YAML or JSON, for copying into a file the CLI submits.

function yamlScalar(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  const text = String(value);
  const plain = /^[A-Za-z_][A-Za-z0-9_.+\- /]*$/.test(text) && !/^(true|false|null|yes|no|on|off|~)$/i.test(text) && !/[:#]\s|\s$/.test(text);
  return plain ? text : JSON.stringify(text);
}

function isEmpty(value) {
  return value && typeof value === "object" && Object.keys(value).length === 0;
}

export function toYaml(value, indent = "") {
  if (Array.isArray(value)) {
    if (!value.length) return " []";
    return value.map((item) => {
      if (item && typeof item === "object" && !isEmpty(item)) {
        const body = toYaml(item, `${indent}  `).replace(/^\n\s*/, "");
        return `\n${indent}- ${body}`;
      }
      return `\n${indent}- ${isEmpty(item) ? (Array.isArray(item) ? "[]" : "{}") : yamlScalar(item)}`;
    }).join("");
  }
  if (value && typeof value === "object") {
    if (isEmpty(value)) return " {}";
    return Object.entries(value).map(([key, item]) => {
      const nested = item && typeof item === "object";
      return `\n${indent}${yamlScalar(key)}:${nested ? toYaml(item, `${indent}  `) : ` ${yamlScalar(item)}`}`;
    }).join("");
  }
  return ` ${yamlScalar(value)}`;
}

export function specText(spec, format) {
  return format === "json" ? JSON.stringify(spec, null, 2) : `${toYaml(spec).replace(/^\n/, "")}\n`;
}
