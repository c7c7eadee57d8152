// A page whose subject the server would not give (an unknown id, or not yours to see): the
// reason, and none of the sections it would have filled, whose headings would stand over nothing.

import { ApiError } from "./api.js";

export function showPageError(message, error) {
  document.getElementById("page-errors").textContent = message;
  if (!(error instanceof ApiError)) return;
  for (const section of document.querySelectorAll("main > section, main > .charts")) section.hidden = true;
}
