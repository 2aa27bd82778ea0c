// drift report's page script: builds every chart from the inlined data (src/study/report_data.h
// describes it) with dygraphs. Each chart's div gets data-drawn="1" once dygraphs has drawn it, the
// body data-ready="1" when every chart exists, and any script error is shown on the page and
// counted in body data-errors: tests/scripts/report_browser.sh reads these from the DOM.
(function () {
  'use strict';
  const t0 = performance.now();
  const errors = [];
  function reportError(msg) {
    errors.push(msg);
    document.body.dataset.errors = String(errors.length);
    document.getElementById('drift-errors').textContent = 'Errors while drawing this report:\n' + errors.join('\n');
  }
  window.addEventListener('error', (e) => reportError(e.message + (e.filename ? ' (' + e.filename + ':' + e.lineno + ')' : '')));
  document.body.dataset.errors = '0';

  const data = JSON.parse(document.getElementById('drift-data').textContent);
  const runs = data.runs;
  const main = document.getElementById('main');
  document.getElementById('generated').textContent = data.generated_by || '';

  // ---- theme: the system's preference, then the button ----
  const dark = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
  document.body.classList.toggle('dark', !!dark);
  document.getElementById('theme').addEventListener('click', () => document.body.classList.toggle('dark'));

  // ---- small DOM helpers ----
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children || []) if (c) e.appendChild(c);
    return e;
  }
  function select(options, onchange, initial) {
    const s = el('select');
    for (const o of options) s.appendChild(el('option', {value: o, text: o}));
    if (initial !== undefined && options.includes(initial)) s.value = initial;
    s.addEventListener('change', () => onchange(s.value));
    return s;
  }
  const sections = [];
  function section(id, title, note) {
    const s = el('section', {id: id}, [el('h2', {text: title})]);
    if (note) s.appendChild(el('p', {class: 'muted', text: note}));
    main.appendChild(s);
    sections.push([id, title]);
    return s;
  }
  function grid(parent) { const g = el('div', {class: 'grid'}); parent.appendChild(g); return g; }

  // ---- colours: one hue per policy, a lightness per seed (chosen by drift: the SVG figures match) ----
  const runColor = (r) => r.color;
  const runName = (r) => r.label + ' seed ' + r.seed;
  const visible = runs.map(() => true);

  // ---- charts ----
  const charts = [];  // {g, runOf: series index -> run id (or null), div}
  let syncing = false;
  function syncZoom(source, lo, hi) {
    if (syncing) return;
    syncing = true;
    for (const c of charts)
      if (c.g !== source && c.stepAxis && c.g.file_) c.g.updateOptions({dateWindow: lo === null ? null : [lo, hi]});
    syncing = false;
  }
  function chartCard(parent, title, opts) {
    const div = el('div', {class: 'chart' + (opts && opts.tall ? ' tall' : '')});
    const labels = el('div', {class: 'labels'});
    const card = el('div', {class: 'card' + (opts && opts.wide ? ' wide' : '')}, [el('h3', {text: title}), div, labels]);
    if (opts && opts.note) card.insertBefore(el('div', {class: 'muted', text: opts.note}), div);
    parent.appendChild(card);
    return {card, div, labels};
  }
  function replaceChart(holder) {
    const i = charts.findIndex((c) => c.div === holder.div);
    if (i >= 0) { charts[i].g.destroy(); charts.splice(i, 1); }
    holder.div.removeAttribute('data-drawn');
  }
  // Axis numbers short enough for the axis: 4 significant digits, exponents for the very large or small.
  function axisNumber(v) {
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1e5 || a < 1e-3) return v.toExponential(a.toExponential(1).includes('.0e') ? 0 : 1).replace('e+', 'e');
    return String(Number(v.toPrecision(4)));
  }
  function baseOptions(holder, labels, colors, extra) {
    return Object.assign({
      labels: labels,
      colors: colors,
      labelsDiv: holder.labels,
      legend: 'onmouseover',
      labelsSeparateLines: false,
      connectSeparatedPoints: true,
      highlightSeriesOpts: {strokeWidth: 2.5, highlightCircleSize: 3},
      highlightSeriesBackgroundAlpha: 0.6,
      gridLineColor: 'rgba(128,128,128,0.25)',
      axisLineColor: 'rgba(128,128,128,0.7)',
      xlabel: 'step',
      axes: {y: {axisLabelWidth: 58, axisLabelFormatter: axisNumber}},
      drawCallback: (g, initial) => { if (initial) holder.div.dataset.drawn = '1'; },
      zoomCallback: (lo, hi) => syncZoom(charts.find((c) => c.div === holder.div).g, lo, hi),
    }, extra || {});
  }
  // series: [{name, run (a run object or null), steps[], values[], color}]. Lines over steps.
  function lineChart(holder, series, extra) {
    replaceChart(holder);
    const stepSet = new Set();
    for (const s of series) s.steps.forEach((x, i) => { if (s.values[i] !== null && s.values[i] !== undefined) stepSet.add(x); });
    const steps = [...stepSet].sort((a, b) => a - b);
    if (!steps.length || !series.length) {
      holder.div.textContent = 'no data';
      holder.div.dataset.drawn = '1';
      return null;
    }
    const rowOf = new Map(steps.map((x, i) => [x, i]));
    const rows = steps.map((x) => { const r = new Array(series.length + 1).fill(null); r[0] = x; return r; });
    series.forEach((s, k) => s.steps.forEach((x, i) => {
      const v = s.values[i];
      if (v !== null && v !== undefined && rowOf.has(x)) rows[rowOf.get(x)][k + 1] = v;
    }));
    holder.div.textContent = '';
    const g = new Dygraph(holder.div, rows, baseOptions(holder, ['step', ...series.map((s) => s.name)], series.map((s) => s.color),
      Object.assign({visibility: series.map((s) => (s.run ? visible[s.run.id] : true))}, extra || {})));
    charts.push({g, div: holder.div, runOf: series.map((s) => (s.run ? s.run.id : null)), stepAxis: true});
    return g;
  }
  // A run's column: metrics.jsonl's over r.steps, diag.jsonl's ("diag.*") over r.diag_steps.
  function column(r, col) {
    const diag = col.startsWith('diag.');
    const values = (diag ? r.diag_cols : r.cols)[col];
    return values ? {steps: diag ? r.diag_steps : r.steps, values: values} : null;
  }
  // One series per run from a column name (runs without it are left out).
  function runSeries(col, transform) {
    const out = [];
    for (const r of runs) {
      const c = column(r, col);
      if (!c) continue;
      out.push({name: runName(r), run: r, steps: c.steps, values: transform ? c.values.map(transform) : c.values, color: runColor(r)});
    }
    return out;
  }
  const anyRunHas = (col) => runs.some((r) => { const c = column(r, col); return c && c.values.some((v) => v !== null); });
  // The divergence record as annotations on each run's loss line, at the logged step at or before it.
  const markerLetters = {divergence: 'D', spike: 'S', departure: 'P', first_nonfinite: 'N'};
  function markerAnnotations(series, col) {
    const notes = [];
    for (const s of series) {
      const r = s.run, vals = r.cols[col];
      for (const [kind, letter] of Object.entries(markerLetters)) {
        const step = r.markers[kind];
        if (step === null || step === undefined) continue;
        let at = null;
        r.steps.forEach((x, i) => { if (x <= step && vals[i] !== null) at = x; });
        if (at === null) r.steps.forEach((x, i) => { if (at === null && vals[i] !== null) at = x; });
        if (at === null) continue;
        notes.push({series: s.name, x: at, shortText: letter, width: 14, height: 14, attachAtBottom: kind === 'divergence',
                    text: kind.replace('_', ' ') + ' step ' + step + (kind === 'divergence' && r.reason ? ': ' + r.reason : '') + ' (' + s.name + ')'});
      }
    }
    return notes;
  }
  function simpleRunChart(parent, title, col, opts) {
    if (!anyRunHas(col)) return;
    const h = chartCard(parent, title, opts);
    const series = runSeries(col, opts && opts.transform);
    const g = lineChart(h, series, opts && opts.dygraph);
    if (g && opts && opts.markers) g.ready(() => g.setAnnotations(markerAnnotations(series, col)));
  }

  // Column families, found by name: sites.<site>.<a|b>.<metric>, classes.<class>.<metric>, ...
  function family(re) {
    const found = new Map();  // key -> Set(metric)
    for (const r of runs) for (const c of [...Object.keys(r.cols), ...Object.keys(r.diag_cols)]) {
      const m = re.exec(c);
      if (!m) continue;
      if (!found.has(m[1])) found.set(m[1], new Set());
      found.get(m[1]).add(m[2]);
    }
    return found;
  }
  const metricsOf = (fam) => [...new Set([...fam.values()].flatMap((s) => [...s]))];

  // ---- heatmap: one row per key (site.operand), a cell per logged step, coloured by value. Drawn by
  // a dygraphs plotter over the step axis, so zoom and hover (the values at a step) are dygraphs'. ----
  const ramp = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis stops
  function rampColor(t) {
    t = Math.min(1, Math.max(0, t)) * (ramp.length - 1);
    const i = Math.min(Math.floor(t), ramp.length - 2), f = t - i;
    const c = ramp[i].map((a, k) => Math.round(a + f * (ramp[i + 1][k] - a)));
    return 'rgb(' + c.join(',') + ')';
  }
  function heatmap(holder, run, keys, colOf, useLog, bar) {
    replaceChart(holder);
    const present = keys.filter((k) => run.cols[colOf(k)]);
    if (!present.length) { holder.div.textContent = 'no data for this run'; holder.div.dataset.drawn = '1'; bar.textContent = ''; return; }
    holder.div.textContent = '';
    let lo = Infinity, hi = -Infinity;
    const tf = (v) => (useLog ? (v > 0 ? Math.log10(v) : null) : v);
    for (const k of present) for (const v of run.cols[colOf(k)]) {
      const t = v === null ? null : tf(v);
      if (t !== null && isFinite(t)) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
    }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    const n = present.length;
    const rowIndex = new Map(present.map((k, i) => [k, n - 1 - i]));  // first key at the top
    const rows = run.steps.map((x, i) => [x, ...present.map((k) => run.cols[colOf(k)][i])]);
    const plotter = (e) => {
      const ctx = e.drawingContext, g = e.dygraph, pts = e.points, r = rowIndex.get(e.setName);
      const y0 = g.toDomYCoord(r + 0.5), y1 = g.toDomYCoord(r - 0.5);
      for (let i = 0; i < pts.length; i++) {
        const p = pts[i], t = p.yval === null ? null : tf(p.yval);
        if (t === null || !isFinite(t)) continue;
        const left = i > 0 ? (pts[i - 1].canvasx + p.canvasx) / 2 : p.canvasx - (pts.length > 1 ? (pts[1].canvasx - p.canvasx) / 2 : 4);
        const right = i + 1 < pts.length ? (p.canvasx + pts[i + 1].canvasx) / 2 : p.canvasx + (i > 0 ? (p.canvasx - pts[i - 1].canvasx) / 2 : 4);
        ctx.fillStyle = rampColor(hi > lo ? (t - lo) / (hi - lo) : 0);
        ctx.fillRect(left, y0, right - left + 0.5, y1 - y0 + 0.5);
      }
    };
    const g = new Dygraph(holder.div, rows, baseOptions(holder, ['step', ...present], present.map(() => '#888'), {
      plotter: plotter,
      valueRange: [-0.5, n - 0.5],
      highlightCircleSize: 0,
      highlightSeriesOpts: null,
      connectSeparatedPoints: false,
      drawGrid: false,
      axes: {y: {axisLabelWidth: Math.min(260, 12 + 7 * Math.max(...present.map((k) => k.length))), ticker: () => present.map((k) => ({v: rowIndex.get(k), label: k}))}},
    }));
    charts.push({g, div: holder.div, runOf: present.map(() => null), stepAxis: true});
    bar.textContent = '';
    bar.appendChild(el('span', {text: (useLog ? '10^' : '') + lo.toPrecision(3) + ' '}));
    const cb = el('span', {class: 'colorbar'});
    cb.style.background = 'linear-gradient(to right,' + ramp.map((c) => 'rgb(' + c.join(',') + ')').join(',') + ')';
    bar.appendChild(cb);
    bar.appendChild(el('span', {text: ' ' + (useLog ? '10^' : '') + hi.toPrecision(3)}));
  }

  // ---- the run legend: toggles a run in every chart ----
  function runLegend() {
    const s = section('runs', 'Runs', runs.length + ' runs. Untick a run to hide it in every chart; drag on a chart to zoom ' +
      '(all step charts follow), double-click to zoom out, hover for values. Markers on the loss curves: D divergence, ' +
      'S loss spike, P departure from the reference run, N first non-finite value.');
    const box = el('div', {class: 'controls'});
    const checks = runs.map((r) => {
      const c = el('input', {type: 'checkbox'});
      c.checked = true;
      const sw = el('span', {class: 'swatch'});
      sw.style.background = runColor(r);
      const lab = el('label', {class: 'check', title: r.dir}, [c, sw, el('span', {text: runName(r) + (r.diverged ? ' (diverged)' : '')})]);
      c.addEventListener('change', () => setRun(r.id, c.checked));
      box.appendChild(lab);
      return c;
    });
    function setRun(id, on) {
      visible[id] = on;
      for (const ch of charts) ch.runOf.forEach((rid, k) => { if (rid === id) ch.g.setVisibility(k, on); });
    }
    const all = el('button', {type: 'button', text: 'all'}), none = el('button', {type: 'button', text: 'none'});
    all.addEventListener('click', () => checks.forEach((c, i) => { c.checked = true; setRun(i, true); }));
    none.addEventListener('click', () => checks.forEach((c, i) => { c.checked = false; setRun(i, false); }));
    s.appendChild(el('div', {class: 'controls'}, [all, none]));
    s.appendChild(box);
  }

  // ---- sections ----
  function lossSection() {
    const s = section('loss', 'Loss');
    const g = grid(s);
    simpleRunChart(g, 'training loss', 'loss', {markers: true});
    simpleRunChart(g, 'validation loss', 'val_loss', {markers: true});
  }
  function signalsSection() {
    const cols = ['lr', 'grad_norm', 'grad_norm_z', 'loss_z', 'grad_norm_max', 'loss_scale', 'skipped', 'grad_clipped',
                  'clipped'];  // (clipped: drift 0.1.0's name of grad_clipped)
    if (!cols.some(anyRunHas)) return;
    const s = section('signals', 'Training signals');
    const g = grid(s);
    simpleRunChart(g, 'learning rate', 'lr');
    simpleRunChart(g, 'gradient norm (log scale)', 'grad_norm', {dygraph: {logscale: true}});
    simpleRunChart(g, 'gradient norm z-score', 'grad_norm_z');
    simpleRunChart(g, 'loss z-score', 'loss_z');
    simpleRunChart(g, 'largest per-tensor gradient norm (log scale)', 'grad_norm_max', {dygraph: {logscale: true}});
    simpleRunChart(g, 'loss scale (log scale)', 'loss_scale', {dygraph: {logscale: true}});
    simpleRunChart(g, 'skipped step (loss scaling: 1 = skipped)', 'skipped', {dygraph: {stepPlot: true}});
    simpleRunChart(g, 'gradient clipped (1 = clipped)', 'clipped', {dygraph: {stepPlot: true}});
  }
  // A family of columns (sites, classes, elementwise) as a key × metric choice: one line per run.
  function familyLines(parent, title, fam, colOf, initialMetric) {
    const keys = [...fam.keys()], metrics = metricsOf(fam);
    if (!keys.length) return;
    const h = chartCard(parent, title, {wide: true});
    let key = keys[0], metric = metrics.includes(initialMetric) ? initialMetric : metrics[0];
    const draw = () => lineChart(h, runSeries(colOf(key, metric)), {});
    const controls = el('div', {class: 'controls'}, [select(keys, (v) => { key = v; draw(); }), select(metrics, (v) => { metric = v; draw(); }, metric)]);
    h.card.insertBefore(controls, h.div);
    draw();
  }
  function sitesSection() {
    const fam = family(/^sites\.(.+\.[ab])\.(clip_rate|flush_rate|subnormal_rate|amax|scale_exp\.min|scale_exp\.max|scale_exp\.mean)$/);
    if (!fam.size) return;
    const s = section('sites', 'Matmul sites', 'Per site (layer.role) and operand (a, b): the fraction of elements clipped, ' +
      'flushed to zero or left subnormal by the operand\'s cast, its largest magnitude (amax) and its scale exponents, per logged step.');
    const g = grid(s);
    const keys = [...fam.keys()], metrics = metricsOf(fam);
    const h = chartCard(g, 'site × step heatmap', {wide: true, tall: keys.length > 12});
    let metric = metrics.includes('clip_rate') ? 'clip_rate' : metrics[0], useLog = false;
    // The first run with something to see (a non-zero value of the metric), else the first.
    let run = runs.find((r) => keys.some((k) => (r.cols['sites.' + k + '.' + metric] || []).some((v) => v))) || runs[0];
    const bar = el('span');
    const logBox = el('input', {type: 'checkbox'});
    const draw = () => heatmap(h, run, keys, (k) => 'sites.' + k + '.' + metric, useLog, bar);
    logBox.addEventListener('change', () => { useLog = logBox.checked; draw(); });
    h.card.insertBefore(el('div', {class: 'controls'}, [
      select(runs.map(runName), (v) => { run = runs.find((r) => runName(r) === v); draw(); }, runName(run)),
      select(metrics, (v) => { metric = v; draw(); }, metric),
      el('label', {class: 'check'}, [logBox, el('span', {text: 'log colour'})]), bar]), h.div);
    draw();
    familyLines(g, 'one site and operand, every run', fam, (k, m) => 'sites.' + k + '.' + m, 'clip_rate');
  }
  function classesSection() {
    const fam = family(/^classes\.(\w+)\.(clip_rate|flush_rate|subnormal_rate|amax)$/);
    if (!fam.size) return;
    const s = section('classes', 'Tensor classes', 'Matmul operands summed per tensor class (activation, weight, gradient).');
    const g = grid(s);
    for (const cls of fam.keys())
      simpleRunChart(g, cls + ' clip rate', 'classes.' + cls + '.clip_rate');
    familyLines(g, 'any class and metric', fam, (k, m) => 'classes.' + k + '.' + m, 'flush_rate');
  }
  function elementwiseSection() {
    const fam = family(/^elementwise\.(.+)\.(clip_rate|flush_rate|subnormal_rate|amax)$/);
    if (!fam.size) return;
    const s = section('elementwise', 'Elementwise quantizers', 'precision.elementwise: LayerNorm γ/β and outputs, activations, softmax.');
    familyLines(grid(s), 'quantizer and metric', fam, (k, m) => 'elementwise.' + k + '.' + m, 'clip_rate');
  }
  function scatterChart(holder, pointsByRun, xlabel, ylabel) {
    replaceChart(holder);
    const xs = new Map();  // x -> row
    pointsByRun.forEach((pts, k) => pts.forEach(([x, y]) => {
      if (!xs.has(x)) xs.set(x, new Array(pointsByRun.length + 1).fill(null));
      xs.get(x)[k + 1] = y;
    }));
    const rows = [...xs.entries()].sort((a, b) => a[0] - b[0]).map(([x, r]) => { r[0] = x; return r; });
    if (!rows.length) { holder.div.textContent = 'no data'; holder.div.dataset.drawn = '1'; return; }
    const used = runs.filter((r, k) => pointsByRun[k]);
    const g = new Dygraph(holder.div, rows, baseOptions(holder, [xlabel, ...runs.map(runName)], runs.map(runColor), {
      drawPoints: true, strokeWidth: 0, pointSize: 2, connectSeparatedPoints: false, xlabel: xlabel, ylabel: ylabel,
      highlightSeriesOpts: null, visibility: runs.map((r) => visible[r.id]), zoomCallback: null}));
    charts.push({g, div: holder.div, runOf: runs.map((r) => r.id), stepAxis: false});
    return used;
  }
  function diagSection() {
    if (!runs.some((r) => Object.keys(r.diag_cols).length)) return;
    const s = section('diag', 'Deep diagnostics (diag.jsonl)', 'Against the exact (fp64) gradient of the same weights and batch: ' +
      'cosine (direction), relative error (size), bias (signed error along the exact gradient; negative: shorter).');
    const g = grid(s);
    simpleRunChart(g, 'gradient cosine, all parameters', 'diag.grad.overall.cosine');
    simpleRunChart(g, 'gradient relative error, all parameters (log scale)', 'diag.grad.overall.rel_error', {dygraph: {logscale: true}});
    simpleRunChart(g, 'gradient bias, all parameters', 'diag.grad.overall.bias');
    simpleRunChart(g, 'logits: max relative deviation (log scale)', 'diag.logits_max_rel_dev', {dygraph: {logscale: true}});
    familyLines(g, 'per parameter tensor', family(/^diag\.grad\.tensors\.(.+)\.(cosine|rel_error|bias)$/),
                (k, m) => 'diag.grad.tensors.' + k + '.' + m, 'rel_error');
    familyLines(g, 'per site: forward output error', family(/^diag\.sites\.(.+)\.(out_rel_error|out_max_rel_dev)$/),
                (k, m) => 'diag.sites.' + k + '.' + m, 'out_rel_error');
    // Cast error size against one-sidedness: a point per site operand and diagnostic step.
    const casts = family(/^diag\.sites\.(.+\.[ab]_cast)\.(rel_error|one_sidedness)$/);
    if (casts.size) {
      const h = chartCard(g, 'cast error: size (x, relative error) against one-sidedness (y)', {
        note: 'a point per site operand and diagnostic step; y < 0: magnitudes shrink on balance'});
      const pts = runs.map((r) => {
        const out = [];
        for (const k of casts.keys()) {
          const xe = r.diag_cols['diag.sites.' + k + '.rel_error'], ye = r.diag_cols['diag.sites.' + k + '.one_sidedness'];
          if (!xe || !ye) continue;
          xe.forEach((x, i) => { if (x !== null && ye[i] !== null) out.push([x, ye[i]]); });
        }
        return out.length ? out : null;
      });
      scatterChart(h, pts, 'cast relative error', 'one-sidedness');
    }
    simpleRunChart(g, 'error-bound checks: violations', 'diag.bound_violations', {dygraph: {stepPlot: true}});
    simpleRunChart(g, 'error-bound checks: largest |C − C*| / bound', 'diag.bound_max_ratio');
    familyLines(g, 'probes (alternative policies at the same weights)', family(/^diag\.probes\.(.+?)\.(loss|logits_max_rel_dev|grad\.overall\.(?:cosine|rel_error|bias))$/),
                (k, m) => 'diag.probes.' + k + '.' + m, 'loss');
  }
  function table(cells) {
    const t = el('table');
    cells.forEach((row, i) => t.appendChild(el('tr', {}, row.map((c) => el(i ? 'td' : 'th', {text: c})))));
    return t;
  }
  function compareSection() {
    if (!runs.length) return;
    const s = section('compare', 'Comparison (drift compare)', 'Policies most robust first: fewest seeds diverged, then latest ' +
      'median divergence step, then lowest validation loss; losses are medians over the seeds that did not diverge.');
    s.appendChild(table(data.compare.policies));
    s.appendChild(el('p', {class: 'muted', text: 'Per seed: "div N" diverged at step N, otherwise the final validation loss.'}));
    s.appendChild(table(data.compare.seeds));
  }
  function bisectSection() {
    if (!data.bisects.length) return;
    const s = section('bisect', 'Bisect verdicts (drift bisect)');
    for (const b of data.bisects) {
      s.appendChild(el('h3', {text: b.dir + ': ' + b.verdict}));
      s.appendChild(el('p', {text: b.conclusion}));
      s.appendChild(table(b.rows));
    }
  }

  try {
    if (runs.length) {
      runLegend();
      lossSection();
      signalsSection();
      sitesSection();
      classesSection();
      elementwiseSection();
      diagSection();
    }
    compareSection();
    bisectSection();
    const nav = document.getElementById('nav');
    for (const [id, title] of sections) nav.appendChild(el('a', {href: '#' + id, text: title}));
  } catch (e) {
    reportError(String(e && e.stack ? e.stack : e));
  }
  document.body.dataset.charts = String(document.querySelectorAll('.chart').length);
  document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
  document.body.dataset.ready = '1';
})();
