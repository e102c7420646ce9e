// Filters the embedded sample index, then loads only the card chunks of the page shown.
(function () {
  "use strict";
  const index = JSON.parse(document.getElementById("explorer-index").textContent);
  const form = document.getElementById("filters");
  const cardsBox = document.getElementById("cards");
  const pager = document.getElementById("pager");
  const summary = document.getElementById("summary");
  const chunks = {}; // model -> chunk number -> Promise of [html | null]
  const waiting = {}; // "model/chunk" -> resolve function
  const OUTCOMES = { both: 3, answer: 1, box: 2, neither: 0 };
  const FILTERS = ["task", "difficulty", "outcome", "result", "stage", "compare"];

  window.dualcogChunk = function (model, number, cards) {
    const key = model + "/" + number;
    if (waiting[key]) { waiting[key](cards); delete waiting[key]; }
  };

  function chunkUrl(model, number) {
    return "data/" + encodeURIComponent(model) + "/c" + String(number).padStart(5, "0") + ".js";
  }

  function loadChunk(model, number) {
    chunks[model] = chunks[model] || {};
    if (!chunks[model][number]) {
      chunks[model][number] = new Promise(function (resolve) {
        waiting[model + "/" + number] = resolve;
        const script = document.createElement("script");
        script.src = chunkUrl(model, number);
        script.onerror = function () { resolve(null); }; // that model did not run these samples
        document.head.appendChild(script);
      });
    }
    return chunks[model][number];
  }

  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const state = { page: Math.max(0, parseInt(params.get("page") || "1", 10) - 1) || 0 };
    FILTERS.forEach(function (name) { state[name] = params.get(name) || ""; });
    return state;
  }

  function writeHash(state) {
    const params = new URLSearchParams();
    FILTERS.forEach(function (name) { if (state[name]) params.set(name, state[name]); });
    if (state.page) params.set("page", String(state.page + 1));
    const hash = params.toString();
    if (("#" + hash) !== location.hash && !(hash === "" && location.hash === "")) {
      location.hash = hash;
    } else {
      render(state);
    }
  }

  function outcomeOf(entry, slot) {
    const a = entry[3], b = entry[4];
    if (slot === "b") return b;
    if (slot === "ab" && b >= 0) return a & b; // both levels must be right
    return a;
  }

  function matching(state) {
    const filter = state.task ? index.task_filters[state.task] : null;
    if (state.task && !filter) return { error: "unknown task id " + state.task, positions: [] };
    const taskSet = filter ? new Set(filter.tasks) : null;
    const slot = filter ? filter.slot : "ab";
    const difficulty = state.difficulty ? index.difficulties.indexOf(state.difficulty) : -2;
    const stage = state.stage ? index.stages.indexOf(state.stage) : -2;
    const result = state.result ? index.results.indexOf(state.result) : -2;
    const outcome = state.outcome in OUTCOMES ? OUTCOMES[state.outcome] : -1;
    const positions = [];
    index.entries.forEach(function (entry, position) {
      if (!entry) return;
      if (taskSet && !taskSet.has(entry[0])) return;
      if (difficulty !== -2 && entry[1] !== difficulty) return;
      if (stage !== -2 && entry[2] !== stage) return;
      if (result !== -2 && entry[5] !== result) return;
      if (outcome >= 0 && outcomeOf(entry, slot) !== outcome) return;
      positions.push(position);
    });
    return { positions: positions };
  }

  function cardHtml(cards, position) {
    const html = cards && cards[position % index.chunk_size];
    return html || '<div class="missing-card">not run by this model</div>';
  }

  let renderToken = 0;
  function render(state) {
    FILTERS.forEach(function (name) {
      const select = form.elements[name];
      if (select) select.value = state[name];
    });
    const found = matching(state);
    const total = found.positions.length;
    const pages = Math.max(1, Math.ceil(total / index.page_size));
    const page = Math.min(state.page, pages - 1);
    const shown = found.positions.slice(page * index.page_size, (page + 1) * index.page_size);
    summary.textContent = found.error ? found.error :
      total + " of " + index.entries.filter(Boolean).length + " samples match" +
      (total ? "; showing " + (page * index.page_size + 1) + "–" +
        (page * index.page_size + shown.length) : "") + ".";
    const models = [index.model].concat(state.compare ? [state.compare] : []);
    const token = ++renderToken;
    const loads = [];
    models.forEach(function (model) {
      new Set(shown.map(function (p) { return Math.floor(p / index.chunk_size); }))
        .forEach(function (n) { loads.push(loadChunk(model, n)); });
    });
    Promise.all(loads).then(function () {
      if (token !== renderToken) return;
      return Promise.all(shown.map(function (position) {
        const n = Math.floor(position / index.chunk_size);
        return Promise.all(models.map(function (model) { return loadChunk(model, n); }))
          .then(function (got) {
            const cells = got.map(function (cards) { return cardHtml(cards, position); });
            return cells.length > 1 ? '<div class="pair-row">' + cells.join("") + "</div>" : cells[0];
          });
      })).then(function (html) {
        if (token !== renderToken) return;
        cardsBox.innerHTML = html.join("");
        document.body.dataset.rendered = String(token); // for tests: the page is drawn
      });
    });
    drawPager(page, pages);
    document.querySelectorAll("a.model-link").forEach(function (link) {
      link.hash = location.hash; // keep the filters when switching model
    });
  }

  // Prev / next, the first and last page, and pages near the current one (paper scale: ~300).
  function drawPager(page, pages) {
    pager.innerHTML = "";
    if (pages <= 1) return;
    function add(label, target, current) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      if (current) button.className = "current";
      if (target < 0 || target >= pages) button.disabled = true;
      button.addEventListener("click", function () {
        writeHash(Object.assign(readHash(), { page: target }));
      });
      pager.appendChild(button);
    }
    add("‹ prev", page - 1, false);
    let last = -1;
    for (let i = 0; i < pages; i++) {
      if (i !== 0 && i !== pages - 1 && Math.abs(i - page) > 3) continue;
      if (last >= 0 && i > last + 1) pager.appendChild(document.createTextNode("…"));
      add(String(i + 1), i, i === page);
      last = i;
    }
    add("next ›", page + 1, false);
  }

  form.addEventListener("change", function () {
    const state = { page: 0 };
    FILTERS.forEach(function (name) { state[name] = form.elements[name].value; });
    writeHash(state);
  });
  window.addEventListener("hashchange", function () { render(readHash()); });
  render(readHash());
})();
