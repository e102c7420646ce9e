// Filters the embedded sample index, loads only the chunks of the page shown, and draws their
// cards. A sample's card (samples/, the same for every model) and a model's record of it
// (data/<model>/) are data (dualcog.explorer.records), joined here; every value reaches the
// page through textContent or setAttribute, never as markup, so a model's answer or name can
// only ever show as text.
(function () {
  "use strict";
  const index = JSON.parse(document.getElementById("explorer-index").textContent);
  const form = document.getElementById("filters");
  const cardsBox = document.getElementById("cards");
  const pager = document.getElementById("pager");
  const summary = document.getElementById("summary");
  const chunks = {}; // model -> chunk number -> Promise of [record | null]
  const waiting = {}; // "model/chunk" -> resolve function
  const cardChunks = {}; // chunk number -> Promise of [card]
  const waitingCards = {}; // chunk number -> resolve function
  const OUTCOMES = { both: 3, answer: 1, box: 2, neither: 0 };
  const FILTERS = ["task", "difficulty", "outcome", "result", "stage", "compare"];
  const SVG = "http://www.w3.org/2000/svg";
  const titles = index.titles;

  window.dualcogChunk = function (model, number, records) {
    const key = model + "/" + number;
    if (waiting[key]) { waiting[key](records); delete waiting[key]; }
  };
  window.dualcogSamples = function (number, cards) {
    if (waitingCards[number]) { waitingCards[number](cards); delete waitingCards[number]; }
  };

  // --- drawing: elements from data, text as text -------------------------------------------

  function node(namespace, tag, attributes, children) {
    const element = namespace ? document.createElementNS(namespace, tag)
      : document.createElement(tag);
    if (attributes) {
      Object.keys(attributes).forEach(function (name) {
        const value = attributes[name];
        if (value !== null && value !== undefined && value !== false) {
          element.setAttribute(name, String(value));
        }
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      element.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    });
    return element;
  }
  function h(tag, attributes, children) { return node(null, tag, attributes, children); }
  function s(tag, attributes, children) { return node(SVG, tag, attributes, children); }

  function num(value) { // SVG numbers: two decimals at most, no trailing zeros
    return value.toFixed(2).replace(/0+$/, "").replace(/\.$/, "");
  }
  function fixed(value, digits) { return value.toFixed(digits); }
  function dash(value, show) {
    return value === null || value === undefined ? "\u2013" : (show ? show(value) : String(value));
  }
  function truncate(text, length) { // Jinja's truncate(length, killwords, "…"), leeway 5
    return text.length <= length + 5 ? text : text.slice(0, length - 1) + "\u2026";
  }
  function taskTitle(task) { return titles.tasks[task] || task; }
  function ticks(duration) {
    const steps = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600];
    let step = steps[steps.length - 1];
    for (let i = 0; i < steps.length; i++) { if (duration / steps[i] <= 8) { step = steps[i]; break; } }
    const out = [];
    const count = Math.floor(duration / step + 1e-9) + 1;
    for (let i = 0; i < count; i++) out.push(Math.round(i * step * 1e6) / 1e6);
    return out;
  }
  function badge(ok, what) {
    return h("span", { class: "badge " + (ok ? "ok" : "bad") }, [(ok ? "\u2713 " : "\u2717 ") + what]);
  }

  function timeline(level, duration) {
    const left = 170, track = 440, row = 30;
    const scale = track / duration;
    const height = 24 + row * level.classes.length;
    const svg = s("svg", {
      class: "timeline", viewBox: "0 0 " + (left + track + 30) + " " + height,
      width: num(left + track + 30), height: num(height),
      "data-duration": duration, "data-left": left, "data-track": track,
    });
    ticks(duration).forEach(function (tick) {
      const x = num(left + tick * scale);
      svg.appendChild(s("line", { class: "tick", x1: x, y1: 0, x2: x, y2: num(height - 14) }));
      svg.appendChild(s("text", { class: "ticklabel", x: x, y: num(height - 2) }, [tick + "s"]));
    });
    level.classes.forEach(function (c, position) {
      const y = row * position + 2;
      svg.appendChild(s("text", { class: "classlabel", x: num(left - 6), y: num(y + 16) },
        [(c.label !== "visible" ? c.label + ". " : "") + truncate(c.name, 24)]));
      svg.appendChild(s("line", { class: "lane", x1: num(left), y1: num(y + 13),
        x2: num(left + track), y2: num(y + 13) }));
      c.gold.forEach(function (g, i) {
        const missed = c.missed.indexOf(i) >= 0;
        const overlap = c.overlap[i];
        let title = "gold " + fixed(g[0], 2) + "\u2013" + fixed(g[1], 2) + " s";
        if (missed) {
          title += ": missed";
          if (overlap !== undefined) {
            title += " (best overlap tIoU " + fixed(overlap, 2) + " < 0.5)";
          }
        }
        svg.appendChild(s("rect", {
          class: "interval gold " + (missed ? "miss" : ""), "data-interval": g[0] + "," + g[1],
          x: num(left + g[0] * scale), y: num(y + 2), width: num(Math.max((g[1] - g[0]) * scale, 1)),
          height: 10,
        }, [s("title", null, [title])]));
      });
      c.pred.forEach(function (p, i) {
        const fp = c.false_positive.indexOf(i) >= 0;
        svg.appendChild(s("rect", {
          class: "interval pred " + (fp ? "fp" : ""), "data-interval": p[0] + "," + p[1],
          x: num(left + p[0] * scale), y: num(y + 14), width: num(Math.max((p[1] - p[0]) * scale, 1)),
          height: 10,
        }, [s("title", null, ["predicted " + fixed(p[0], 2) + "\u2013" + fixed(p[1], 2) + " s" +
          (fp ? ": false positive" : "")])]));
      });
      c.matched.forEach(function (m) {
        const g = c.gold[m[0]], p = c.pred[m[1]];
        svg.appendChild(s("text", { class: "match", x: num(left + track + 2), y: num(y + 16) },
          [fixed(m[2], 2)]));
        svg.appendChild(s("line", { class: "pair", x1: num(left + (g[0] + g[1]) / 2 * scale),
          y1: num(y + 12), x2: num(left + (p[0] + p[1]) / 2 * scale), y2: num(y + 14) }));
      });
      if (c.invalid_pred) {
        svg.appendChild(s("text", { class: "invalid", x: num(left + track + 2), y: num(y + 26) },
          ["+" + c.invalid_pred + " invalid"]));
      }
    });
    return svg;
  }

  function imageParts(r) {
    const badges = h("div", { class: "badges" }, [
      badge(r.option_correct, "answer"), badge(r.bbox_hit, "box (IoU \u2265 0.5)"),
      h("span", { class: "iou" }, ["IoU " + dash(r.iou, function (v) { return fixed(v, 3); })]),
    ]);
    const views = h("div", { class: "views" });
    r.images.forEach(function (im) {
      const w = im.width, ht = im.height;
      const thumb = s("svg", { class: "thumb", "data-role": im.role,
        viewBox: "0 0 " + w + " " + ht, preserveAspectRatio: "none" });
      if (im.file) {
        thumb.appendChild(s("image", { href: im.file, x: 0, y: 0, width: num(w), height: num(ht),
          preserveAspectRatio: "none" }));
      }
      const caption = h("figcaption", null, [im.role.replace(/_/g, " ")]);
      im.boxes.forEach(function (b) {
        const x0 = b.xyxy[0], y0 = b.xyxy[1], x1 = b.xyxy[2], y1 = b.xyxy[3];
        thumb.appendChild(s("rect", { class: "box " + b.kind, "data-xyxy": b.xyxy.join(","),
          x: num(x0 * w), y: num(y0 * ht), width: num((x1 - x0) * w), height: num((y1 - y0) * ht) }));
        caption.appendChild(document.createTextNode(" \u00b7 "));
        caption.appendChild(h("span", { class: "key " + b.kind }, [titles.boxes[b.kind] || b.kind]));
      });
      views.appendChild(h("figure", { class: "view " + (im.boxes.length ? "drawn" : "") },
        [thumb, caption]));
    });
    return [badges, views];
  }

  function videoParts(r) {
    const duration = r.duration || 1;
    const badges = h("div", { class: "badges" });
    Object.keys(r.outcomes).forEach(function (task) {
      const bits = r.outcomes[task];
      badges.appendChild(h("span", { class: "scored" }, [taskTitle(task) + ":"]));
      badges.appendChild(badge(bits % 2 === 1, "answer"));
      badges.appendChild(badge(bits >= 2, "intervals (F1@0.5 \u2265 0.5)"));
    });
    if (r.task === "landmark_visibility") {
      badges.appendChild(h("span", { class: "count" },
        ["count: predicted " + dash(r.count) + ", gold " + dash(r.gold_count)]));
    }
    const parts = [badges, h("p", { class: "legend-inline" },
      ["video " + fixed(duration, 2) + " s \u00b7 tIoU of each matched pair at the right"])];
    Object.keys(r.levels).forEach(function (name) {
      const level = r.levels[name];
      let heading = (titles.levels[name] || name) + ": " + dash(level.tp) +
        " matched (tIoU \u2265 0.5), " + dash(level.fp) + " false positive, " + dash(level.fn) +
        " missed \u00b7 F1@0.5 " + dash(level.f1, function (v) { return fixed(v, 2); });
      if (level.set_exact !== null && level.set_exact !== undefined) {
        heading += " \u00b7 option set " + (level.set_exact ? "exact" : "not exact");
      }
      parts.push(h("section", { class: "level" }, [h("h4", null, [heading]),
        level.classes.length ? timeline(level, duration)
          : h("p", { class: "empty" }, ["nothing gold or predicted at this level"])]));
    });
    if (r.strip && r.strip.length) {
      parts.push(h("div", { class: "strip" }, r.strip.map(function (f) {
        // Frame f.frame of the video's sprite sheet: the sheet's cell shown through a viewBox.
        return h("figure", null, [
          s("svg", { class: "frame", "data-frame": f.frame, role: "img", width: 160, height: 120,
            viewBox: (f.frame * f.width) + " 0 " + f.width + " " + f.height,
            "aria-label": "frame at " + f.time + " s" }, [
            s("image", { href: f.file, x: 0, y: 0, width: f.frames * f.width, height: f.height }),
          ]),
          h("figcaption", null, [f.label + " starts " + fixed(f.start, 2) + " s (frame " +
            fixed(f.time, 2) + " s)"]),
        ]);
      })));
    }
    return parts;
  }

  function drawCard(r, model) {
    const card = h("article", { class: "card " + r.modality, "data-sample": r.id,
      "data-model": model }, [h("header", null, [
      h("span", { class: "task" }, [taskTitle(r.task)]),
      r.difficulty ? h("span", { class: "difficulty" }, [r.difficulty]) : null,
      h("span", { class: "model" }, [model]),
      h("code", { class: "sid" }, [r.id]),
    ])]);
    (r.modality === "image" ? imageParts(r) : videoParts(r)).forEach(function (part) {
      card.appendChild(part);
    });
    if (r.modality === "image" || (r.options && r.options.length)) {
      card.appendChild(h("ul", { class: "options" }, (r.options || []).map(function (o) {
        return h("li", { class: (o.gold ? "gold" : "") + " " + (o.chosen ? "chosen" : "") }, [
          h("b", null, [o.id]), " " + o.label,
          o.level ? " " : null, o.level ? h("i", null, [o.level]) : null,
          o.gold ? " " : null, o.gold ? h("span", { class: "tag gold" }, ["gold"]) : null,
          o.chosen ? " " : null, o.chosen ? h("span", { class: "tag chosen" }, ["chosen"]) : null,
        ]);
      })));
    }
    let status = "";
    if (r.status !== "ok") {
      status = " \u00b7 response " + r.status + (r.error_type ? " (" + r.error_type + ")" : "");
    }
    const table = h("table", { class: "fields" }, [h("tbody", null, [
      h("tr", null, [h("th", null, ["request outcome"]), h("td", { colspan: 2 }, [
        h("span", { class: "result result-" + r.result }, [r.result.replace(/_/g, " ")])])]),
      h("tr", null, [h("th", null, ["parse stage"]), h("td", { colspan: 2 }, [
        h("span", { class: "stage stage-" + r.stage }, [r.stage]), status])]),
    ].concat(r.fields.map(function (f) {
      return h("tr", null, [h("th", null, [f.name]),
        h("td", { class: f.valid ? "ok" : "bad" }, [f.valid ? "valid" : "invalid"]),
        h("td", null, [(f.reason || "") + (f.rescaled ? " rescaled" : "") +
          (f.reordered ? " reordered" : "")])]);
    })))]);
    card.appendChild(table);
    if (r.question) {
      card.appendChild(h("details", { class: "question" }, [h("summary", null, ["Question"]),
        h("p", null, [r.question])]));
    }
    if (r.request) card.appendChild(requestParts(r.request));
    card.appendChild(h("details", { class: "raw" }, [
      h("summary", null, ["Raw response" +
        (r.raw_truncated ? " (first " + titles.raw_limit + " characters)" : "")]),
      h("pre", null, [r.raw !== null && r.raw !== undefined ? r.raw : "(no response text)"]),
    ]));
    return card;
  }

  // What was posted for the sample (PROTOCOL §11.5): the body's SHA-256 and what shaped it.
  function requestParts(q) {
    const sw = q.switch || {};
    const rows = [
      ["body SHA-256", h("code", null, [q.sha256])],
      ["temperature", String(q.temperature)],
      ["max_tokens", q.max_tokens === null || q.max_tokens === undefined ? "none sent"
        : String(q.max_tokens)],
      ["mode switch", (sw.mode || "none") + (sw.family ? " (family " + sw.family + ")" : "") +
        (sw.body && Object.keys(sw.body).length ? " " + JSON.stringify(sw.body) : "") +
        (sw.system_prefix ? "; think-protocol system prefix" : "")],
      ["prefill", q.prefill === null || q.prefill === undefined ? "none"
        : JSON.stringify(q.prefill)],
      ["re-encoded video", q.reencoded ? q.reencoded.map(function (v) {
        return v.bytes_before + " \u2192 " + v.bytes_after + " bytes (" +
          (v.width ? "width " + v.width + ", " : "") + v.bitrate_k + " kb/s), sent " + v.sent_sha256;
      }).join("; ") : "none"],
    ];
    return h("details", { class: "request" }, [h("summary", null, ["Request sent"]),
      h("table", { class: "fields" }, [h("tbody", null, rows.map(function (row) {
        return h("tr", null, [h("th", null, [row[0]]), h("td", null, [row[1]])]);
      }))])]);
  }

  // A model's record on its sample's card: the card's images with the model's boxes, its
  // options marked where the model chose them.
  function joined(card, record) {
    const r = Object.assign({}, card, record);
    if (card.images) {
      r.images = card.images.map(function (im, i) {
        return Object.assign({}, im, { boxes: (record.boxes && record.boxes[i]) || [] });
      });
    }
    if (card.options) {
      const chosen = record.chosen || [];
      r.options = card.options.map(function (o) {
        return Object.assign({}, o, { chosen: chosen.indexOf(o.id) >= 0 });
      });
    }
    return r;
  }

  function drawCell(cards, records, position, model) {
    const record = records && records[position % index.chunk_size];
    const card = cards && cards[position % index.chunk_size];
    if (!record) return h("div", { class: "missing-card" }, ["not run by this model"]);
    try {
      if (!card) throw new Error("no sample card");
      return drawCard(joined(card, record), model);
    } catch (error) { // a malformed record: say so in its place, draw the others
      console.warn("explorer: card " + position + " of " + model + ": " + error);
      return h("div", { class: "missing-card" }, ["this card could not be drawn"]);
    }
  }

  // --- loading and filtering -----------------------------------------------------------------

  function chunkUrl(model, number) {
    return "data/" + encodeURIComponent(model) + "/c" + String(number).padStart(5, "0") + ".js";
  }

  function loadCards(number) {
    if (!cardChunks[number]) {
      cardChunks[number] = new Promise(function (resolve) {
        waitingCards[number] = resolve;
        const script = document.createElement("script");
        script.src = index.samples + "/c" + String(number).padStart(5, "0") + ".js";
        script.onerror = function () { resolve(null); };
        document.head.appendChild(script);
      });
    }
    return cardChunks[number];
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
    const numbers = new Set(shown.map(function (p) { return Math.floor(p / index.chunk_size); }));
    numbers.forEach(function (n) { loads.push(loadCards(n)); });
    models.forEach(function (model) {
      numbers.forEach(function (n) { loads.push(loadChunk(model, n)); });
    });
    Promise.all(loads).then(function () {
      if (token !== renderToken) return;
      return Promise.all(shown.map(function (position) {
        const n = Math.floor(position / index.chunk_size);
        return Promise.all([loadCards(n)].concat(models.map(function (model) {
          return loadChunk(model, n);
        })));
      })).then(function (loaded) {
        if (token !== renderToken) return;
        const drawn = loaded.map(function (got, i) {
          const cells = got.slice(1).map(function (records, m) {
            return drawCell(got[0], records, shown[i], models[m]);
          });
          return cells.length > 1 ? h("div", { class: "pair-row" }, cells) : cells[0];
        });
        cardsBox.replaceChildren.apply(cardsBox, drawn);
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
    pager.replaceChildren();
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
