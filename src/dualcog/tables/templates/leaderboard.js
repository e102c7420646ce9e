"use strict";
(function () {
  const views = Array.from(document.querySelectorAll("section.view"));
  const tabs = Array.from(document.querySelectorAll("nav.views button"));
  let parse = "compatible";

  function showView(key) {
    for (const view of views) view.hidden = view.dataset.view !== key;
    for (const tab of tabs) tab.setAttribute("aria-selected", String(tab.dataset.view === key));
  }

  function showParse(value) {
    parse = value;
    for (const variant of document.querySelectorAll("div.variant")) {
      const own = variant.dataset.parse;
      variant.hidden = own !== "" && own !== parse;
    }
  }

  function applyGroups() {
    const shown = new Set(
      Array.from(document.querySelectorAll("input.group-filter:checked"), (box) => box.value)
    );
    for (const body of document.querySelectorAll("table.results tbody[data-group]")) {
      body.hidden = !shown.has(body.dataset.group);
    }
  }

  function cellKey(row, index) {
    const cell = row.cells[index];
    const sort = cell.dataset.sort;
    if (sort !== undefined && sort !== "") return { number: Number(sort), text: "" };
    return { number: null, text: cell.textContent.trim().toLowerCase() };
  }

  function sortTable(table, index, header) {
    const descending = header.getAttribute("aria-sort") !== "descending";
    for (const other of table.querySelectorAll("th.sortable")) other.removeAttribute("aria-sort");
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    const sign = descending ? -1 : 1;
    for (const body of table.tBodies) {
      const rows = Array.from(body.rows).filter((row) => !row.classList.contains("group"));
      rows.sort((a, b) => {
        const x = cellKey(a, index);
        const y = cellKey(b, index);
        if (x.number === null && y.number === null) return sign * x.text.localeCompare(y.text);
        if (x.number === null) return 1; // dashes last either way
        if (y.number === null) return -1;
        return sign * (x.number - y.number) || Number(a.dataset.order) - Number(b.dataset.order);
      });
      for (const row of rows) body.appendChild(row);
    }
  }

  for (const tab of tabs) tab.addEventListener("click", () => showView(tab.dataset.view));
  for (const radio of document.querySelectorAll("input[name=parse]")) {
    radio.addEventListener("change", () => showParse(radio.value));
  }
  for (const box of document.querySelectorAll("input.group-filter")) {
    box.addEventListener("change", applyGroups);
  }
  const ciToggle = document.getElementById("show-ci");
  if (ciToggle) {
    ciToggle.addEventListener("change", () => document.body.classList.toggle("show-ci", ciToggle.checked));
  }
  for (const header of document.querySelectorAll("th.sortable")) {
    const sort = () => sortTable(header.closest("table"), Number(header.dataset.col), header);
    header.addEventListener("click", sort);
    header.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        sort();
      }
    });
  }
  // Inside the Snakemake report this page is a data: URI, where the relative links to the
  // explorer pages (results/explorer/, beside results/leaderboard.html) lead nowhere.
  if (location.protocol === "data:") {
    for (const link of document.querySelectorAll('a[href^="explorer/"]')) {
      const text = document.createElement("span");
      text.className = "v";
      text.textContent = link.textContent;
      link.replaceWith(text);
    }
    for (const note of document.querySelectorAll("p.explorer-note")) {
      note.textContent = "The per-sample explorer is not part of the report: open " +
        "results/leaderboard.html, where each value links to results/explorer/<model>.html.";
    }
  }
  showView(tabs.length ? tabs[0].dataset.view : "");
  showParse(parse);
  applyGroups();
})();
