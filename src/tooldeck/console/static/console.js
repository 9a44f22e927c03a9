// The tooldeck operator console's one script: a page whose main element says data-refresh="ms" has that element
// fetched again (?part=main) that often and swapped in, while the page is visible and no form on it is being used.
// Served from the console's own origin (its Content-Security-Policy allows no other script and no inline one).
"use strict";
(function () {
  const main = document.getElementById("main");
  if (!main || !main.dataset.refresh) return;
  const every = Math.max(500, Number(main.dataset.refresh) || 2000);
  async function refresh() {
    const busy = document.activeElement && main.contains(document.activeElement) &&
      document.activeElement.matches("input, textarea, select");
    if (!document.hidden && !busy) {
      const url = new URL(window.location.href);
      url.searchParams.set("part", "main");
      try {
        const response = await fetch(url, { credentials: "same-origin", headers: { accept: "text/html" } });
        if (response.ok) {
          const holder = document.createElement("div");
          holder.innerHTML = await response.text();
          const fresh = holder.querySelector("#main");
          if (fresh) main.innerHTML = fresh.innerHTML;
        }
      } catch (error) {
        // the server is away for a moment: the next round tries again
      }
    }
    window.setTimeout(refresh, every);
  }
  window.setTimeout(refresh, every);
})();
