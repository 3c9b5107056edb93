// gale web UI: plain JS, no build step. Every URL is relative so the page works under a prefix.
'use strict';
(() => {
  const params = new URLSearchParams(location.search);
  const token = params.get('token') || '';
  // A worker's UI shows the topology ?topology= names (else the first it runs): every
  // API call carries it.
  const topology = params.get('topology') || '';
  const REFRESH_MS = 2000;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#2563eb', '#16a34a', '#dc2626', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#475569'];
  const $ = (id) => document.getElementById(id);

  // ---- DOM helpers ----
  function build(node, attrs, kids) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v != null && v !== false) node.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k != null && k !== false) node.append(k);
    return node;
  }
  const el = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids);
  const svg = (tag, attrs, ...kids) => build(document.createElementNS(SVGNS, tag), attrs, kids);

  // ---- formatting ----
  const num = (v) => typeof v === 'number' && isFinite(v);
  // Counts get thousands separators (en-US, whatever the browser's locale, so that a
  // number reads the same everywhere); ids (tasks, seqs) do not.
  const NF0 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const NF1 = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const NF3 = new Intl.NumberFormat('en-US', { minimumFractionDigits: 3, maximumFractionDigits: 3 });
  const NFS = new Intl.NumberFormat('en-US', { maximumSignificantDigits: 3 });
  const int = (v) => (num(v) ? NF0.format(Math.round(v)) : '');
  const dec = (v) => (num(v) ? NF3.format(v) : '');
  const rate = (v) => (num(v) ? NF1.format(v) : '');
  const sig = (v) => (num(v) ? NFS.format(v) : '');
  const ident = (v) => (num(v) ? String(v) : '');
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function clock(ms, withMs) {
    const d = new Date(ms);
    const s = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return withMs ? `${s}.${pad(d.getMilliseconds(), 3)}` : s;
  }
  function duration(sec) {
    if (!num(sec)) return '';
    if (sec < 60) return `${sec.toFixed(1)} s`;
    const s = Math.floor(sec), m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
    if (d) return `${d}d ${h % 24}h ${pad(m % 60)}m`;
    if (h) return `${h}h ${pad(m % 60)}m ${pad(s % 60)}s`;
    return `${m}m ${pad(s % 60)}s`;
  }
  const ms = (v) => (num(v) ? `${int(v)} ms` : '');

  // ---- API ----
  function withTopology(path) {
    return topology ? path + (path.includes('?') ? '&' : '?') + 'topology=' + encodeURIComponent(topology) : path;
  }
  async function api(path, method) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    let res;
    try {
      res = await fetch(withTopology(path), { method: method || 'GET', headers, cache: 'no-store' });
    } catch (e) {
      throw new Error(`cannot reach the server for ${path}: ${e.message}`);
    }
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
    if (res.status === 401) {
      throw new Error(token ? 'token required: the server refused the token in this URL'
        : 'token required: open this page with ?token=YOUR_TOKEN');
    }
    if (!res.ok) {
      const err = new Error((body && body.error) || `${path}: HTTP ${res.status} ${text.slice(0, 200)}`);
      err.status = res.status;
      throw err;
    }
    if (body === null) throw new Error(`${path}: the answer is not JSON`);
    return body;
  }

  // ---- page state and routing ----
  let gen = 0;          // bumped on every route change; stale answers are dropped
  let timer = null;
  let finishedAt = null; // when the job finished (Unix ms), once the server says so
  function showError(msg) {
    $('error').textContent = msg;
    $('error').hidden = false;
    document.body.dataset.ready = 'error';
  }
  function ready() {
    $('error').hidden = true;
    $('error').textContent = '';
    document.body.dataset.ready = '1';
    if (finishedAt == null) {
      $('live').textContent = `live · updated ${clock(Date.now())}`;
      $('live').dataset.state = 'live';
    }
  }

  // renderHeader shows the topology's name and its uptime, or, once the job has
  // finished, how long it ran and when it finished: nothing is live any more.
  function renderHeader(topo, what) {
    const name = topo.name || 'topology';
    $('topo-name').textContent = topo.name || '';
    document.title = `gale · ${name}` + (what ? ` · ${what}` : '');
    if (topo.idle) {
      finishedAt = null;
      $('uptime').textContent = 'not running here';
    } else if (topo.finished) {
      finishedAt = topo.finished_at;
      $('uptime').textContent = 'ran ' + duration(topo.uptime_seconds);
      $('live').textContent = `finished at ${clock(topo.finished_at)}`;
      $('live').dataset.state = 'finished';
    } else {
      finishedAt = null; // a worker's UI follows the next generation
      $('uptime').textContent = (topo.cluster ? 'this generation up ' : 'up ') + duration(topo.uptime_seconds);
    }
    $('lookup-id').placeholder = topo.ingest ? 'event id, message id or root id' : 'message id or root id';
  }

  function route() {
    gen++;
    clearTimeout(timer);
    delete document.body.dataset.ready;
    $('error').hidden = true;
    const m = location.hash.match(/^#\/(tree|event|find)\/(.+)$/);
    $('overview').hidden = !!m;
    $('tree-page').hidden = !m;
    if (m) {
      let id = m[2];
      try { id = decodeURIComponent(id); } catch (_) { /* keep it raw */ }
      $('tree').replaceChildren(el('p', { class: 'muted' }, 'loading…'));
      const load = { tree: loadTree, event: loadEvent, find: loadFind }[m[1]];
      loop(gen, (g) => load(g, id));
    } else {
      loop(gen, loadOverview);
    }
  }

  // loop runs load, marks the page ready (or failed), and schedules the next refresh
  // unless load returned false (nothing more to watch).
  async function loop(g, load) {
    let again = true;
    try {
      again = (await load(g)) !== false;
      if (g === gen) ready();
    } catch (e) {
      if (g === gen) showError(e.message || String(e));
    }
    if (g === gen && again) timer = setTimeout(() => loop(g, load), REFRESH_MS);
  }

  // ---- overview ----
  async function loadOverview(g) {
    const win = $('window').value;
    const topo = await api('api/topology');
    if (g !== gen) return false;
    if (topo.cluster) clusterColumns();
    const idle = !!topo.idle; // a worker that runs no generation of it now
    const running = (p) => (idle ? null : api(p));
    const [cl, stats, hist, failed, timedOut, sampled, ingest] = await Promise.all([
      // The cluster's state may be unreadable (NATS down) while the topology runs.
      topo.cluster ? api('api/cluster').catch((e) => ({ failed: e.message || String(e) })) : null,
      running('api/stats?window=' + encodeURIComponent(win)),
      running('api/history'),
      running('api/trees?kind=failed&limit=50'),
      running('api/trees?kind=timed_out&limit=50'),
      running('api/trees?kind=sampled&limit=50'),
      topo.ingest && !idle ? api('api/ingest') : null,
    ]);
    if (g !== gen) return false;
    renderHeader(topo);
    $('cluster-box').hidden = !cl;
    if (cl) renderCluster(cl);
    $('idle').hidden = !idle;
    $('idle').textContent = idle ? topo.note || '' : '';
    for (const sec of document.querySelectorAll('#overview section.rt')) sec.hidden = idle;
    $('ingest-box').hidden = !ingest;
    if (idle) return true; // wait for a generation to start here
    $('stats-note').hidden = !stats.partial;
    $('stats-note').textContent = stats.partial ? stats.note || '' : '';
    renderDag(topo, stats);
    renderStats(stats);
    renderCharts(hist);
    renderTreeList($('recent-failed'), failed.trees, failed.note);
    renderTreeList($('recent-timed-out'), timedOut.trees, timedOut.note);
    renderTreeList($('recent-sampled'), sampled.trees, sampled.note);
    if (ingest) renderIngest(ingest);
    // A finished job's numbers do not change: stop refreshing; but a worker's UI
    // follows the topology's next generation.
    return !topo.finished || !!topo.cluster;
  }

  // ---- cluster (a worker's UI) ----
  const placeOf = { task: {}, comp: {} }; // task id -> worker; component id -> its workers
  const workerCol = {
    key: 'worker', label: 'Worker', tip: 'The worker (gale worker process) that runs the task; for a component, the workers of its tasks',
    fmt: (r) => (r.task ? placeOf.task[r.task] || '' : (placeOf.comp[r.id] || []).join(', ')),
  };
  let spoutCols = null, boltCols = null; // with a Worker column on a worker's UI; set before the first table is drawn
  function clusterColumns() {
    if (spoutCols) return;
    const withWorker = (cols) => cols.flatMap((c) => (c === tasksCol ? [c, workerCol] : [c]));
    spoutCols = withWorker(SPOUT_COLS);
    boltCols = withWorker(BOLT_COLS);
  }
  const WORKER_COLS = [
    { key: 'name', label: 'Worker', tip: 'The worker\'s name; "this UI" serves this page, "scheduler" holds the scheduler\'s lease, "lost" is of the generation but its heartbeat expired',
      fmt: (r) => r.name + [r.self && 'this UI', r.scheduler && 'scheduler', !r.live && 'lost'].filter(Boolean).map((t) => ` (${t})`).join('') },
    { key: 'host', label: 'Host', tip: 'The machine it runs on', fmt: (r) => r.host || '' },
    { key: 'pid', label: 'PID', tip: 'Its process id', num: true, fmt: (r) => (r.pid ? ident(r.pid) : '') },
    { key: 'uptime', label: 'Uptime', tip: 'Since the worker process started', num: true, fmt: (r) => (r.live ? duration(r.uptime_seconds) : '') },
    { key: 'heartbeat_age', label: 'Heartbeat age', tip: 'Since the cluster stored its last heartbeat: a worker silent for the heartbeat TTL (3 s by default) is lost', num: true,
      fmt: (r) => (r.live ? duration(r.heartbeat_age_seconds) : 'expired') },
    { key: 'slots', label: 'Slots', tip: 'How many topologies it runs at once (dedicated: only tasks pinned to it)', num: true,
      fmt: (r) => (r.live ? int(r.slots) + (r.dedicated ? ' (dedicated)' : '') : '') },
    { key: 'tasks', label: 'Tasks', tip: 'The tasks of this topology the newest generation places on it', fmt: (r) => (r.tasks || []).join(' ') },
    { key: 'generation', label: 'Running', tip: 'The generation of this topology it runs now', num: true, fmt: (r) => (r.generation ? 'g' + r.generation : '–') },
    { key: 'others', label: 'Also runs', tip: 'Other topologies it runs, with their generation',
      fmt: (r) => Object.entries(r.running || {}).filter(([t]) => t !== clusterTopology).map(([t, g]) => `${t}@g${g}`).sort().join(' ') },
    { key: 'refused', label: 'Refused', tip: 'Why it refuses this topology (not in its build, another fingerprint): the scheduler places it elsewhere', err: true, fmt: (r) => r.refused || '', title: (r) => r.refused || '' },
  ];
  const PLACE_COLS = [
    { key: 'id', label: 'Component', tip: 'A component of the topology (__acker: the acker tasks)' },
    { key: 'tasks', label: 'Tasks', tip: 'Its task ids', fmt: (r) => r.tasks.map((t) => t.task).join(' ') },
    { key: 'workers', label: 'Task → worker', tip: 'The worker of each of its tasks',
      fmt: (r) => r.tasks.map((t) => `${t.task} → ${t.worker || 'none'}`).join(' · ') },
  ];
  let clusterTopology = '', clusterState = '';

  function renderCluster(cl) {
    if (cl.failed) {
      $('cluster-error').hidden = false;
      $('cluster-error').textContent = cl.failed;
      return;
    }
    clusterTopology = cl.topology || '';
    clusterState = cl.state || '';
    placeOf.task = {};
    placeOf.comp = {};
    for (const c of cl.components || []) {
      for (const t of c.tasks || []) placeOf.task[t.task] = t.worker;
      placeOf.comp[c.id] = [...new Set((c.tasks || []).map((t) => t.worker).filter(Boolean))].sort();
    }
    const parts = [];
    if (cl.topology) {
      parts.push(`topology ${cl.topology}: ${cl.state}`);
      if (cl.generation) parts.push(`generation ${cl.generation}`);
      if (cl.want) parts.push(`wants ${cl.want} worker${cl.want === 1 ? '' : 's'}` + (cl.short ? ` (${cl.short} short: no free slots)` : ''));
    } else {
      parts.push('no topology runs on this worker');
    }
    parts.push(cl.scheduler ? `scheduler: ${cl.scheduler.holder}` : 'no scheduler holds the lease');
    parts.push(`this page is served by worker ${cl.self}`);
    $('cluster-summary').textContent = parts.join(' · ');
    $('cluster-error').hidden = !cl.error;
    $('cluster-error').textContent = cl.error ? `the scheduler refused the last request: ${cl.error}` : '';
    renderTopologies(cl);
    renderTable($('workers'), WORKER_COLS, (cl.workers || []).map((w) => ({ ...w, id: w.name })), false);
    renderTable($('placement'), PLACE_COLS, (cl.components || []).map((c) => ({ ...c, tasks: c.tasks || [] })), false);
    $('actions').hidden = !cl.actions || !cl.topology;
    $('actions-note').hidden = !!cl.actions;
    $('actions-note').textContent = cl.actions ? '' : cl.actions_note || '';
    const st = cl.state;
    for (const b of $('actions').querySelectorAll('button[data-action]')) {
      const a = b.dataset.action;
      b.disabled = busy || (a === 'activate' ? st !== 'inactive' : a === 'deactivate' ? st !== 'active' : st !== 'active' && st !== 'inactive');
    }
  }

  // renderTopologies links the other topologies the worker can show (?topology=).
  function renderTopologies(cl) {
    const names = cl.topologies || [];
    const nav = $('topologies');
    const sig = JSON.stringify([names, cl.topology]);
    if (sigs.get(nav) === sig) return;
    sigs.set(nav, sig);
    nav.hidden = names.length < 2 && (names.length === 0 || names[0] === cl.topology);
    nav.replaceChildren(el('span', { class: 'muted' }, 'topologies: '), ...names.map((n) => {
      if (n === cl.topology) return el('strong', { 'data-topology': n }, n + ' ');
      const p = new URLSearchParams(location.search);
      p.set('topology', n);
      return el('a', { href: '?' + p.toString(), 'data-topology': n }, n + ' ');
    }));
  }

  let busy = false; // an action is waiting for the scheduler
  async function act(action) {
    const what = { kill: 'Kill', deactivate: 'Deactivate', activate: 'Activate', rebalance: 'Rebalance' }[action];
    let path = 'api/cluster/' + action;
    let question = `${what} topology ${clusterTopology}?`;
    if (action === 'rebalance') {
      const n = Math.max(0, Math.floor(Number($('rebalance-workers').value) || 0));
      path += '?workers=' + n;
      question = `Rebalance topology ${clusterTopology} over ${n ? n + ' workers' : 'as many workers as now'}? Its trees drain and it starts again as a new generation.`;
    }
    if (action !== 'activate' && !window.confirm(question)) return;
    busy = true;
    for (const b of $('actions').querySelectorAll('button')) b.disabled = true;
    $('action-result').textContent = `${action}: waiting for the scheduler…`;
    try {
      const r = await api(path, 'POST');
      $('action-result').textContent = `${action}: done, generation ${r.generation}, ${r.state}` +
        (r.workers && r.workers.length ? ` on ${r.workers.join(', ')}` : '');
    } catch (e) {
      $('action-result').textContent = `${action} failed: ${e.message || e}`;
    }
    busy = false;
    route();
  }

  // ---- DAG ----
  const NODE_W = 170, NODE_H = 62, ROW_H = 96, PAD = 16;
  const edgeLabel = (e) => (e.grouping || '') +
    (e.grouping === 'fields' && e.fields && e.fields.length ? `(${e.fields.join(', ')})` : '');
  let dagSig = '';
  const capClass = (c) => (!num(c) ? 'cap-unknown' : c < 0.5 ? 'cap-low' : c < 0.8 ? 'cap-mid' : 'cap-high');

  function renderDag(topo, stats) {
    const box = $('dag');
    const sig = JSON.stringify([topo.components, topo.edges, topo.layout]);
    if (sig !== dagSig) {
      box.replaceChildren(buildDag(topo));
      dagSig = sig;
    }
    const caps = {};
    for (const b of stats.bolts || []) caps[b.id] = b.capacity;
    for (const g of box.querySelectorAll('g.node.bolt')) {
      const c = caps[g.dataset.id];
      g.setAttribute('class', 'node bolt ' + capClass(c));
      g.querySelector('.cap').textContent = 'capacity ' + (num(c) ? dec(c) : '–');
    }
  }

  function buildDag(topo) {
    const comps = topo.components || [], layout = topo.layout || {};
    const longest = Math.max(0, ...(topo.edges || []).map((e) => edgeLabel(e).length + (e.stream === 'default' ? 0 : e.stream.length + 3)));
    const COL_W = NODE_W + Math.max(100, longest * 6.3 + 40);
    const pos = {};
    let w = 0, h = 0;
    comps.forEach((c, i) => {
      const l = layout[c.id] || { layer: 0, row: i };
      const p = (pos[c.id] = { x: PAD + (l.layer || 0) * COL_W, y: PAD + (l.row || 0) * ROW_H });
      w = Math.max(w, p.x + NODE_W + PAD);
      h = Math.max(h, p.y + NODE_H + PAD);
    });
    const root = svg('svg', { class: 'dag', viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img', 'aria-label': 'topology graph' },
      svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
        svg('path', { d: 'M0,0 L10,5 L0,10 z' }))));
    // Spread the edges along each node's sides (ordered by the other end's row) so that
    // edges into one node arrive apart; labels sit just before the arrowhead.
    const edges = (topo.edges || []).filter((e) => pos[e.from] && pos[e.to]);
    const outs = {}, ins = {};
    for (const e of edges) {
      (outs[e.from] ||= []).push(e);
      (ins[e.to] ||= []).push(e);
    }
    const portY = (list, e, other) => {
      list.sort((a, b) => pos[other(a)].y - pos[other(b)].y || pos[other(a)].x - pos[other(b)].x);
      return (NODE_H * (list.indexOf(e) + 1)) / (list.length + 1);
    };
    for (const e of edges) {
      const a = pos[e.from], b = pos[e.to];
      const x1 = a.x + NODE_W, y1 = a.y + portY(outs[e.from], e, (d) => d.to);
      const x2 = b.x, y2 = b.y + portY(ins[e.to], e, (d) => d.from);
      const dx = Math.max(60, Math.abs(x2 - x1) / 2);
      root.append(svg('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to, 'data-stream': e.stream },
        svg('title', {}, `${e.from} → ${e.to}, stream ${e.stream}, ${edgeLabel(e)} grouping`),
        svg('path', { d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)' }),
        svg('text', { x: x2 - 10, y: y2 - 5, 'text-anchor': 'end', class: 'edge-label' }, edgeLabel(e),
          e.stream && e.stream !== 'default' ? svg('tspan', { class: 'stream' }, ` [${e.stream}]`) : null)));
    }
    for (const c of comps) {
      const p = pos[c.id], spout = c.kind === 'spout';
      const streams = (c.streams || []).map((s) => `${s.id}(${(s.fields || []).join(', ')})`).join(', ');
      root.append(svg('g', { class: spout ? 'node spout' : 'node bolt cap-unknown', 'data-id': c.id, transform: `translate(${p.x},${p.y})` },
        svg('title', {}, `${c.id}: ${c.kind}, parallelism ${c.parallelism}, tasks ${(c.tasks || []).join(', ')}` +
          (streams ? `\nstreams: ${streams}` : '')),
        svg('rect', { width: NODE_W, height: NODE_H, rx: spout ? 20 : 4 }),
        svg('text', { x: 12, y: 20, class: 'nid' }, c.id.length > 20 ? c.id.slice(0, 19) + '…' : c.id),
        svg('text', { x: 12, y: 37, class: 'kind' }, `${c.kind} ×${c.parallelism}`),
        svg('text', { x: 12, y: 53, class: spout ? 'tasks' : 'cap' }, spout ? `tasks ${(c.tasks || []).join(', ')}` : 'capacity –')));
    }
    if (topo.ackers && topo.ackers.tasks) {
      const at = topo.ackers.tasks || [];
      return el('div', {}, root, el('p', { class: 'muted small' }, at.length ? `ackers: ${at.length} task${at.length === 1 ? '' : 's'} (id ${at.join(', ')})` : 'ackers: none (tracking off)'));
    }
    return root;
  }

  // ---- stats tables ----
  const intCol = (key, label, tip) => ({ key, label, tip, num: true, fmt: (r) => int(r[key]) });
  const latCol = (key, label, tip) => ({
    key, label, tip, num: true,
    fmt: (r) => dec(r[key] && r[key].mean),
    title: (r) => (r[key] ? `mean ${dec(r[key].mean)} ms · p50 ${dec(r[key].p50)} ms · p99 ${dec(r[key].p99)} ms` : ''),
  });
  const idCol = { key: 'id', label: 'Id', tip: 'Component id; click a row to show its tasks' };
  const tasksCol = intCol('tasks', 'Tasks', 'Number of tasks running this component');
  const errCol = { key: 'last_error', label: 'Last error', tip: 'The most recent error reported by a task', fmt: (r) => r.last_error || '', title: (r) => r.last_error || '' };
  const EMITTED = 'Emitted: the number of emit calls (one emit counts once, however many tasks receive it)';
  const TRANSFERRED = 'Transferred: the number of tuples sent to consumer tasks (one emit received by N tasks counts N)';
  const SPOUT_COLS = [idCol, tasksCol,
    intCol('emitted', 'Emitted', EMITTED),
    intCol('transferred', 'Transferred', TRANSFERRED),
    latCol('complete_latency_ms', 'Complete latency (ms, mean)', 'Complete latency: the mean time from the spout emitting a tuple to its tuple tree being completely processed (hover a cell for p50 and p99)'),
    intCol('acked', 'Acked', 'Acked: the number of tuple trees fully processed (every tuple in the tree acked)'),
    intCol('failed', 'Failed', 'Failed: the number of tuple trees failed explicitly by a bolt (timed-out trees are counted apart)'),
    intCol('timed_out', 'Timed out', 'Timed out: the number of tuple trees not completed within the message timeout'),
    intCol('pending', 'Pending', 'Pending: spout tuples emitted whose trees are not yet acked, failed or timed out'),
    errCol];
  const BOLT_COLS = [idCol, tasksCol,
    intCol('emitted', 'Emitted', EMITTED),
    intCol('transferred', 'Transferred', TRANSFERRED),
    { key: 'capacity', label: 'Capacity', num: true, fmt: (r) => dec(r.capacity),
      tip: 'Capacity: executed × average execute latency / window length; near 1 means the bolt is saturated (add parallelism)' },
    latCol('execute_latency_ms', 'Execute latency (ms, mean)', 'Execute latency: the mean time a tuple spends in the execute method (hover for p50 and p99)'),
    intCol('executed', 'Executed', 'Executed: the number of incoming tuples processed by execute'),
    latCol('process_latency_ms', 'Process latency (ms, mean)', 'Process latency: the mean time from the start of execute to the ack of the tuple (hover for p50 and p99)'),
    intCol('acked', 'Acked', 'Acked: the number of tuples acknowledged by this bolt'),
    intCol('failed', 'Failed', 'Failed: the number of tuples failed by this bolt'),
    intCol('queue_depth', 'Queue depth', 'Queue depth: tuples waiting in the input queues of the tasks'),
    errCol];
  const ACKER_COLS = [tasksCol,
    intCol('pending', 'Pending', 'Tuple trees the ackers are tracking now'),
    intCol('unmatched', 'Unmatched', 'Acks held without their init: ahead of it, or late for a tree already ended (dropped later as orphans)'),
    intCol('completed', 'Completed', 'Tuple trees fully acked (reported to the spout as ack)'),
    intCol('failed', 'Failed', 'Tuple trees failed explicitly (reported to the spout as fail)'),
    intCol('expired', 'Expired', 'Tuple trees that passed the message timeout (reported to the spout as fail)'),
    intCol('orphans', 'Orphans', 'Unmatched entries dropped after the message timeout: late or stray acks')];

  const expanded = new Set();   // "table:id" of the rows showing their tasks
  const lastRows = {};          // table id -> last items, to redraw on a click
  const sigs = new WeakMap();   // element -> JSON of what it shows, to skip identical redraws

  function fillRow(tr, cols, rec, task) {
    cols.forEach((c, i) => {
      const td = tr.cells[i] || tr.insertCell();
      let key = c.key, text = c.fmt ? c.fmt(rec) : String(rec[c.key] ?? '');
      if (task && c === idCol) { key = 'task'; text = `task ${rec.task}`; }
      if (task && c === tasksCol) text = '';
      if (td.dataset.col !== key) td.dataset.col = key;
      const cls = c.num ? 'num' : c === errCol || c.err ? 'err' : '';
      if (td.className !== cls) td.className = cls;
      if (td.textContent !== text) td.textContent = text;
      const title = c.title ? c.title(rec) : '';
      if (td.title !== title) td.title = title;
    });
  }

  function renderTable(table, cols, items, expandable) {
    lastRows[table.id] = items;
    if (!table.tHead) {
      const tr = table.createTHead().insertRow();
      for (const c of cols) tr.append(el('th', { title: c.tip, class: c.num ? 'num' : null, 'data-col': c.key }, c.label));
    }
    const bodies = new Map([...table.tBodies].map((b) => [b.dataset.id, b]));
    let prev = table.tHead;
    const place = (b) => { if (prev.nextSibling !== b) prev.after(b); prev = b; };
    for (const item of items) {
      const id = String(item.id ?? table.id);
      let body = bodies.get(id);
      bodies.delete(id);
      if (!body) {
        body = el('tbody', { 'data-id': id });
        const tr = body.insertRow();
        tr.dataset.id = id;
        if (expandable) {
          tr.className = 'comp';
          tr.tabIndex = 0;
          tr.addEventListener('click', () => toggle(table, id));
          tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); toggle(table, id); } });
        }
      }
      place(body);
      fillRow(body.rows[0], cols, item, false);
      if (!expandable) continue;
      const open = expanded.has(table.id + ':' + id);
      body.rows[0].setAttribute('aria-expanded', open);
      body.classList.toggle('open', open);
      const tasks = open ? item.by_task || [] : [];
      while (body.rows.length > tasks.length + 1) body.deleteRow(-1);
      tasks.forEach((t, i) => {
        const tr = body.rows[i + 1] || body.insertRow();
        tr.className = 'task';
        tr.dataset.task = t.task;
        fillRow(tr, cols, t, true);
      });
    }
    if (!items.length) {
      let none = bodies.get('');
      bodies.delete('');
      if (!none) none = el('tbody', { 'data-id': '', class: 'none' }, el('tr', {}, el('td', { colspan: cols.length }, 'none')));
      place(none);
    }
    for (const b of bodies.values()) b.remove();
  }

  function toggle(table, id) {
    const k = table.id + ':' + id;
    if (!expanded.delete(k)) expanded.add(k);
    renderTable(table, table.id === 'spouts' ? spoutCols || SPOUT_COLS : boltCols || BOLT_COLS, lastRows[table.id] || [], true);
  }

  function renderStats(stats) {
    renderTable($('spouts'), spoutCols || SPOUT_COLS, stats.spouts || [], true);
    renderTable($('bolts'), boltCols || BOLT_COLS, stats.bolts || [], true);
    renderTable($('acker'), ACKER_COLS, stats.acker ? [{ ...stats.acker, id: 'acker' }] : [], false);
    const box = $('misuse-box');
    const entries = Object.entries(stats.misuse || {}).filter(([, n]) => n).sort(([a], [b]) => a.localeCompare(b));
    const sig = JSON.stringify(entries);
    if (sigs.get(box) === sig) return;
    sigs.set(box, sig);
    box.replaceChildren(...(entries.length ? [
      el('h3', { title: 'API misuse reported by the runtime (double acks, anchoring to a finished tuple, ...)' }, 'API misuse'),
      el('ul', { id: 'misuse', class: 'misuse' }, entries.map(([k, n]) =>
        el('li', { 'data-kind': k }, el('span', { class: 'kind' }, k), ': ', el('span', { class: 'num', 'data-col': 'count' }, int(n))))),
    ] : []));
  }

  // ---- ingest path (gale serve) ----
  const STATUS_COLS = [{ key: 'id', label: 'Reached', tip: 'A status events reached: the counts are cumulative, an event counts in every status it reached' },
    intCol('count', 'Events', 'Events that reached this status since the start, whatever status they are in now (an event retried enters FAILED_RETRYABLE once per failed attempt)'),
    { key: 'per_s', label: 'Per second', num: true, fmt: (r) => rate(r.per_s), tip: 'Events per second entering this status over the last interval' }];
  const LOG_COLS = [{ key: 'label', label: 'Log', tip: 'The durable event log' },
    { key: 'value', label: 'Value', num: true, fmt: (r) => r.fmt(r.value) }];

  function renderIngest(p) {
    renderTable($('ingest-statuses'), STATUS_COLS, (p.statuses || []).map((s) => ({ id: s.status, count: s.count, per_s: s.per_s })), false);
    $('ingest-held').textContent = `${int(p.held)} event${p.held === 1 ? '' : 's'} in progress (held in memory)` +
      (num(p.interval_seconds) && p.interval_seconds ? ` · rates over the last ${duration(p.interval_seconds)}` : '');
    const l = p.log || {};
    renderTable($('ingest-log'), LOG_COLS, [
      { id: 'durable', label: 'Newest durable seq', value: l.durable, fmt: ident },
      { id: 'committed', label: 'Committed offset (next seq to process)', value: l.committed, fmt: ident },
      { id: 'lag', label: 'Durable records not finished', value: l.lag, fmt: int },
      { id: 'records', label: 'Records synced', value: l.records, fmt: int },
      { id: 'records_per_s', label: 'Records synced per second', value: l.records_per_s, fmt: rate },
      { id: 'commits', label: 'Group commits (fsyncs)', value: l.commits, fmt: int },
      { id: 'commits_per_s', label: 'Group commits per second', value: l.commits_per_s, fmt: rate },
      { id: 'commit_mean_ms', label: 'Commit (fsync) latency, mean over the interval (ms)', value: l.commit_mean_ms, fmt: (v) => (num(v) ? dec(v) : '–') },
      { id: 'commit_p50_ms', label: 'Commit latency p50 since start, at most (ms)', value: l.commit_p50_ms, fmt: dec },
      { id: 'commit_p99_ms', label: 'Commit latency p99 since start, at most (ms)', value: l.commit_p99_ms, fmt: dec },
    ], false);
    const dl = p.dead_letters || [];
    const table = $('dead-letters');
    const key = JSON.stringify(dl);
    if (sigs.get(table) === key) return;
    sigs.set(table, key);
    table.replaceChildren(
      el('thead', {}, el('tr', {}, ['Event', 'Seq', 'Attempts', 'When', 'Reason'].map((h, i) =>
        el('th', { class: i === 1 || i === 2 ? 'num' : null }, h)))),
      el('tbody', {}, dl.length ? dl.map((d) => el('tr', { 'data-id': d.event_id },
        el('td', { 'data-col': 'event_id' }, el('a', { href: '#/event/' + encodeURIComponent(d.event_id) }, d.event_id)),
        el('td', { 'data-col': 'seq', class: 'num' }, ident(d.seq)),
        el('td', { 'data-col': 'attempts', class: 'num' }, int(d.attempts)),
        el('td', { 'data-col': 'at', title: new Date(d.at).toISOString() }, clock(d.at)),
        el('td', { 'data-col': 'reason', class: 'reason' }, d.reason))) :
        el('tr', { class: 'none' }, el('td', { colspan: 5, class: 'muted' }, 'none'))));
  }

  // ---- lookup: an event id (with an ingest path), else a message id or root id ----
  async function loadFind(g, id) {
    const topo = await api('api/topology');
    if (g !== gen) return false;
    if (topo.ingest) {
      try {
        const p = await api('api/events/' + encodeURIComponent(id));
        if (g !== gen) return false;
        history.replaceState(null, '', location.pathname + location.search + '#/event/' + encodeURIComponent(id));
        renderHeader(topo, `event ${id}`);
        renderEvent(p);
        return !topo.finished;
      } catch (e) {
        if (e.status !== 404) throw e;
      }
    }
    if (g !== gen) return false;
    history.replaceState(null, '', location.pathname + location.search + '#/tree/' + encodeURIComponent(id));
    return loadTree(g, id);
  }

  async function loadEvent(g, id) {
    let topo, p;
    try {
      [topo, p] = await Promise.all([api('api/topology'), api('api/events/' + encodeURIComponent(id))]);
    } catch (e) {
      if (g === gen) $('tree').replaceChildren();
      throw e;
    }
    if (g !== gen) return false;
    renderHeader(topo, `event ${id}`);
    renderEvent(p);
    return !topo.finished;
  }

  function renderEvent(p) {
    const ev = p.event || {};
    const field = (k, v, attrs) => [el('dt', {}, k), el('dd', attrs || {}, v)];
    const head = el('div', { class: 'tree-head' },
      el('h2', {}, 'Event ', el('code', {}, ev.event_id || ''), ' ',
        el('span', { class: `outcome status-${ev.status}`, 'data-col': 'status' }, ev.status)),
      el('dl', { class: 'meta' },
        field('Event id', el('code', {}, ev.event_id || ''), { 'data-col': 'event_id' }),
        field('Status', ev.status || '', { 'data-col': 'status' }),
        field('Seq (message id)', ident(ev.seq), { 'data-col': 'seq' }),
        // The resubmission generation (POST /v1/events/{id}:retry): 0, the event as
        // first sent, is not shown, lest it read as the topology's generation.
        ev.generation ? field('Resubmission', ident(ev.generation), { 'data-col': 'generation' }) : null,
        field('Attempts', int(ev.attempts), { 'data-col': 'attempts' }),
        ev.last_error ? field('Last error', ev.last_error, { 'data-col': 'last_error', class: 'reason' }) : null));
    const trs = ev.transitions || [];
    const ttable = el('table', { id: 'transitions', class: 'stats' },
      el('thead', {}, el('tr', {}, ['Step', 'Status', 'When', 'Attempt', 'Error'].map((h, i) =>
        el('th', { class: i === 3 ? 'num' : null }, h)))),
      el('tbody', {}, trs.map((t, i) => el('tr', { 'data-id': String(i) },
        el('td', { 'data-col': 'step' }, t.step),
        el('td', { 'data-col': 'status' }, t.status || ''),
        el('td', { 'data-col': 'at', title: new Date(t.at).toISOString() }, clock(t.at, true)),
        el('td', { 'data-col': 'attempt', class: 'num' }, t.attempt ? int(t.attempt) : ''),
        el('td', { 'data-col': 'error', class: 'reason' }, t.error || '')))));
    const trees = el('ul', { id: 'event-trees', class: 'tree-list' });
    renderTreeList(trees, p.trees);
    $('tree').replaceChildren(...[head,
      el('h3', {}, 'History'), el('div', { class: 'scroll' }, ttable),
      el('h3', { title: 'The tuple trees recorded for this event (its message id in the topology is its seq): sampled, failed or timed out' }, 'Tuple trees'),
      trees,
      p.note ? el('p', { class: 'note' }, p.note) : null].filter(Boolean));
  }

  // ---- charts ----
  function niceScale(max) {
    if (!(max > 0)) return { max: 1, step: 0.25 };
    const raw = max / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    const step = mag * (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10);
    return { max: Math.ceil(max / step - 1e-9) * step, step };
  }
  const tick = (v) => (Math.abs(v) >= 10000 ? `${sig(v / 1000)}k` : sig(v));

  // lineChart draws series [{name, color, unit, pts: [[t, v|null], ...]}] into box.
  function lineChart(box, series, opts = {}) {
    const times = series.length ? series[0].pts.map((p) => p[0]) : [];
    if (times.length < 2) {
      box.replaceChildren(el('p', { class: 'collecting' }, 'collecting…'));
      return;
    }
    const W = 480, H = 210, L = 50, R = 14, T = 12, B = 38;
    const t0 = Math.min(...times), t1 = Math.max(...times);
    let vmax = opts.minMax || 0;
    for (const s of series) for (const [, v] of s.pts) if (num(v)) vmax = Math.max(vmax, v);
    const sc = niceScale(vmax);
    const x = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (W - L - R);
    const y = (v) => H - B - (v / sc.max) * (H - T - B);
    const root = svg('svg', { class: 'chart-svg', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label || 'chart' });
    for (let v = 0; v <= sc.max + 1e-9; v += sc.step) {
      root.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }),
        svg('text', { class: 'tick', x: L - 5, y: y(v) + 4, 'text-anchor': 'end' }, tick(v)));
    }
    for (const v of opts.marks || []) {
      if (v <= sc.max) root.append(svg('line', { class: 'mark', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    }
    const nx = 4;
    for (let i = 0; i <= nx; i++) {
      const t = t0 + ((t1 - t0) * i) / nx;
      root.append(svg('line', { class: 'axis', x1: x(t), x2: x(t), y1: H - B, y2: H - B + 4 }),
        svg('text', { class: 'tick', x: x(t), y: H - B + 16, 'text-anchor': i === 0 ? 'start' : i === nx ? 'end' : 'middle' }, clock(t)));
    }
    root.append(svg('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }),
      svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }),
      svg('text', { class: 'axis-label', x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle' }, 'time'),
      svg('text', { class: 'axis-label', x: 12, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${(T + H - B) / 2})` }, opts.yLabel || ''));
    const legend = el('ul', { class: 'legend' });
    // A point without a value (no tree completed) or missing (no sample: more than
    // 1.5 intervals since the previous one) lifts the pen: a gap, not a line to 0.
    const maxStep = opts.intervalMs ? 1.5 * opts.intervalMs : Infinity;
    for (const s of series) {
      let d = '', pen = false, last = null, prevT = null;
      const segs = [], starts = [];
      for (const [t, v] of s.pts) {
        if (prevT != null && t - prevT > maxStep) pen = false;
        prevT = t;
        if (!num(v)) { pen = false; continue; }
        d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
        if (!pen) { segs.push([]); starts.push([t, v]); }
        segs[segs.length - 1].push(+v.toFixed(3));
        pen = true;
        last = v;
      }
      // data-values: the values drawn, a segment of the line per "|".
      root.append(svg('path', { class: 'series', d: d || 'M0,0', stroke: s.color, 'data-series': s.name,
        'data-values': segs.map((g) => g.join(',')).join('|') }, svg('title', {}, s.name)));
      // A segment of one point has no length: a dot shows it.
      segs.forEach((g, i) => {
        if (g.length === 1) {
          root.append(svg('circle', { class: 'dot', cx: x(starts[i][0]).toFixed(1), cy: y(starts[i][1]).toFixed(1), r: 2.5,
            fill: s.color, 'data-series': s.name }));
        }
      });
      legend.append(el('li', { 'data-series': s.name }, el('span', { class: 'swatch', style: `background:${s.color}` }), s.name,
        el('span', { class: 'muted' }, last == null ? '' : ` ${sig(last)}${s.unit || ''}`)));
    }
    box.replaceChildren(root, legend);
  }

  function renderCharts(hist) {
    const pts = (hist && hist.points) || [];
    const ser = (name, color, get, unit) => ({ name, color, unit, pts: pts.map((p) => [p.t, get(p)]) });
    const lat = (p, q) => (p.complete_ms ? p.complete_ms[q] : null);
    const intervalMs = hist && hist.interval_seconds ? hist.interval_seconds * 1000 : 0;
    lineChart($('chart-throughput'), [
      ser('emitted', PALETTE[0], (p) => p.emitted_per_s, '/s'),
      ser('acked', PALETTE[1], (p) => p.acked_per_s, '/s'),
      ser('failed', PALETTE[2], (p) => p.failed_per_s, '/s'),
    ], { yLabel: 'tuples/s', label: 'throughput', intervalMs });
    lineChart($('chart-latency'), [
      ser('p50', PALETTE[0], (p) => lat(p, 'p50'), ' ms'),
      ser('p99', PALETTE[4], (p) => lat(p, 'p99'), ' ms'),
    ], { yLabel: 'ms', label: 'complete latency', intervalMs });
    const bolts = [...new Set(pts.flatMap((p) => Object.keys(p.capacity || {})))].sort();
    lineChart($('chart-capacity'), bolts.length ? bolts.map((b, i) =>
      ser(b, PALETTE[i % PALETTE.length], (p) => p.capacity && p.capacity[b])) : [ser('capacity', PALETTE[0], () => null)],
    { yLabel: 'capacity', label: 'bolt capacity', minMax: 1, marks: [0.8], intervalMs });
  }

  // ---- tree lists ----
  // note: why the list may lack trees (lineage off, or a process keeping trees did
  // not answer).
  function renderTreeList(ul, trees, note) {
    trees = trees || [];
    const sig = JSON.stringify([trees, note]);
    if (sigs.get(ul) === sig) return;
    sigs.set(ul, sig);
    const noted = note ? [el('li', { class: 'note muted' }, note)] : [];
    ul.replaceChildren(...noted, ...(trees.length ? trees.map((t) => {
      const id = t.root || t.msg_id;
      return el('li', { 'data-root': t.root },
        el('a', { href: '#/tree/' + encodeURIComponent(id) }, el('code', {}, id)),
        t.msg_id ? el('span', { class: 'muted' }, ` msg ${t.msg_id}`) : null,
        el('span', { class: 'muted' }, ` · ${t.spout}[${t.spout_task}] · ${t.outcome} · ${clock(t.ended_at || t.started_at)}`),
        t.reason ? el('div', { class: 'reason' }, t.reason) : null);
    }) : [el('li', { class: 'none muted' }, 'none')]));
  }

  // ---- tree page ----
  async function loadTree(g, id) {
    let topo, t;
    try {
      [topo, t] = await Promise.all([api('api/topology'), api('api/trees/' + encodeURIComponent(id))]);
    } catch (e) {
      if (g === gen) $('tree').replaceChildren();
      throw e;
    }
    if (g !== gen) return false;
    renderHeader(topo, `tree ${t.root || t.msg_id}`);
    renderTree(t);
    return t.outcome === 'pending' && !topo.finished;
  }

  function renderTree(t) {
    const start = t.started_at;
    const rel = (ts) => (num(ts) && ts ? `+${ms(ts - start)}` : '');
    const took = t.ended_at ? ms(t.ended_at - start) : `${ms(Date.now() - start)} so far`;
    const field = (k, v, attrs) => [el('dt', {}, k), el('dd', attrs || {}, v)];
    const head = el('div', { class: 'tree-head' },
      el('h2', {}, 'Tuple tree ', el('code', {}, t.root || ''), ' ',
        el('span', { class: `outcome outcome-${t.outcome}`, 'data-col': 'outcome' }, t.outcome)),
      el('dl', { class: 'meta' },
        field('Root', el('code', {}, t.root || ''), { 'data-col': 'root' }),
        field('Message id', t.msg_id || '', { 'data-col': 'msg_id' }),
        field('Spout', `${t.spout}[${t.spout_task}]`, { 'data-col': 'spout' }),
        field('Outcome', t.outcome, { 'data-col': 'outcome', class: `outcome-${t.outcome}` }),
        t.reason ? field('Reason', t.reason, { 'data-col': 'reason', class: 'reason' }) : null,
        field('Started', `${new Date(start).toLocaleDateString()} ${clock(start, true)}`, { 'data-col': 'started_at' }),
        field('Duration', took, { 'data-col': 'duration' }),
        field('Sampled', t.sampled ? 'yes' : 'no', { 'data-col': 'sampled' })),
      t.note ? el('p', { class: 'note' }, t.note) : null);

    const nodes = t.nodes || [];
    const pendingByNode = new Map((t.pending || []).map((p) => [p.node, p]));
    let tupleSection;
    if (!nodes.length) {
      tupleSection = el('p', { class: 'muted' }, 'No tuple-level detail for this tree (it was not sampled): what is known is below.');
    } else {
      const byId = new Map(nodes.map((n) => [n.id, n]));
      const kids = new Map();
      const tops = [];
      for (const n of nodes) {
        const parent = (n.parents || []).find((p) => byId.has(p) && p !== n.id);
        if (parent) {
          if (!kids.has(parent)) kids.set(parent, []);
          kids.get(parent).push(n);
        } else tops.push(n);
      }
      const drawn = new Set();
      const item = (n) => {
        drawn.add(n.id);
        const children = (kids.get(n.id) || []).filter((c) => !drawn.has(c.id));
        children.forEach((c) => drawn.add(c.id));
        return el('li', {},
          nodeLine(n, rel, pendingByNode.get(n.id)),
          children.length ? el('ul', {}, children.map(item)) : null);
      };
      const list = el('ul', { class: 'tuples' }, tops.map(item));
      const rest = nodes.filter((n) => !drawn.has(n.id)); // only on a cycle in parents
      if (rest.length) list.append(...rest.map(item));
      tupleSection = list;
    }

    const ptable = el('table', { id: 'pending', class: 'stats' },
      el('thead', {}, el('tr', {}, ['Node', 'Component', 'Task', 'Since', 'Age (ms)', 'Source'].map((h, i) =>
        el('th', { class: i === 2 || i === 4 ? 'num' : null }, h)))),
      el('tbody', {}, (t.pending || []).length ? t.pending.map((p) => el('tr', { 'data-id': p.node },
        el('td', { 'data-col': 'node' }, el('code', {}, p.node || '')),
        el('td', { 'data-col': 'component' }, p.component),
        el('td', { 'data-col': 'task', class: 'num' }, ident(p.task)),
        el('td', { 'data-col': 'since', title: new Date(p.since).toISOString() }, `${clock(p.since, true)} (${rel(p.since)})`),
        el('td', { 'data-col': 'age_ms', class: 'num' }, int(p.age_ms)),
        el('td', { 'data-col': 'source' }, p.source || ''))) : el('tr', { class: 'none' }, el('td', { colspan: 6, class: 'muted' }, 'nothing pending'))));

    const fails = t.fails || [];
    const ftable = el('table', { id: 'fails', class: 'stats' },
      el('thead', {}, el('tr', {}, ['Failed by', 'Task', 'Input from', 'Stream', 'When', 'Reason'].map((h, i) =>
        el('th', { class: i === 1 ? 'num' : null }, h)))),
      el('tbody', {}, fails.map((f) => el('tr', {},
        el('td', { 'data-col': 'component' }, f.component),
        el('td', { 'data-col': 'task', class: 'num' }, ident(f.task)),
        el('td', { 'data-col': 'from' }, `${f.from}[${f.from_task}]`),
        el('td', { 'data-col': 'stream' }, f.stream),
        el('td', { 'data-col': 'at' }, rel(f.at)),
        el('td', { 'data-col': 'reason', class: 'reason' }, f.reason)))));
    const attempts = t.attempts || [];
    const alist = el('ol', { id: 'attempts' }, attempts.map((r) => el('li', {},
      r === t.root ? el('code', {}, `${r} (this one)`) : el('a', { href: '#/tree/' + r }, el('code', {}, r)))));
    // (replaceChildren writes a null as the text "null": leave the absent parts out)
    $('tree').replaceChildren(...[head,
      el('h3', {}, 'Tuples'), tupleSection,
      fails.length ? el('h3', { title: 'Explicit fails: the task that failed a tuple of this tree, the input and the reason' }, 'Fail points') : null,
      fails.length ? el('div', { class: 'scroll' }, ftable) : null,
      el('h3', { title: 'Edges whose tuple has not been acked or failed yet: the task named holds it' }, 'Pending (stuck) edges'),
      el('div', { class: 'scroll' }, ptable),
      attempts.length > 1 ? el('h3', { title: 'Every tree recorded for this message id (sampled, failed or timed out): each replay roots a new tree' }, `Recorded attempts of message ${t.msg_id}`) : null,
      attempts.length > 1 ? alist : null].filter(Boolean));
  }

  function nodeLine(n, rel, pend) {
    const to = n.to_component ? `${n.to_component}[${n.to_task}]` : '(no consumer)';
    let state;
    if (n.state === 'pending') {
      const age = num(n.age_ms) ? n.age_ms : pend && num(pend.age_ms) ? pend.age_ms : Date.now() - n.emitted_at;
      state = el('span', { class: 'state state-pending' }, `PENDING: held by ${to} for ${ms(age)}`);
    } else {
      const after = num(n.done_at) && n.done_at ? ` after ${ms(n.done_at - n.emitted_at)}` : '';
      const by = n.done_by_task ? ` by task ${n.done_by_task}` : '';
      state = el('span', { class: `state state-${n.state}` }, `${n.state}${by}${after}`);
    }
    const extra = (n.parents || []).slice(1);
    return el('div', { class: `tuple tuple-${n.state}`, 'data-node': n.id },
      el('code', { class: 'nodeid' }, n.id), ' ',
      el('span', { class: 'edge' }, `${n.component}[${n.task}] → ${to}`),
      n.stream && n.stream !== 'default' ? el('span', { class: 'stream' }, ` stream ${n.stream}`) : null,
      el('span', { class: 'when' }, ` at ${rel(n.emitted_at)}`), ' ', state,
      n.reason ? el('span', { class: 'reason' }, ` ${n.reason}`) : null,
      extra.length ? el('span', { class: 'muted' }, ` (also anchored to ${extra.join(', ')})`) : null);
  }

  // ---- wiring (once the DOM is parsed: index.html adds this script dynamically) ----
  function start() {
    const win = params.get('window');
    if (win && [...$('window').options].some((o) => o.value === win)) $('window').value = win;
    $('window').addEventListener('change', () => {
      const p = new URLSearchParams(location.search);
      p.set('window', $('window').value);
      history.replaceState(null, '', '?' + p.toString() + location.hash);
      route();
    });
    $('lookup').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = $('lookup-id').value.trim();
      if (v) location.hash = '#/find/' + encodeURIComponent(v);
    });
    for (const b of $('actions').querySelectorAll('button[data-action]')) {
      b.addEventListener('click', () => act(b.dataset.action));
    }
    window.addEventListener('hashchange', route);
    route();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
