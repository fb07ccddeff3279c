// The moderation queue: three tabs with their counts, the comments of the open one oldest first
// (paged, "Load more" appends), filtered to one discussion or not, with approve, reject, ban and
// history per comment, bulk approve and reject, and live changes from other moderators and
// authors.

import { banAuthor } from './bans.js';
import { announce, ask, cleanHtml, cut, el, link, showError, time, uid } from './dom.js';
import { findDiscussion } from './discussions.js';

const PAGE_SIZE = 20;
const QUEUES = ['PENDING', 'REPORTED', 'REJECTED'];

const ITEM = `discussionId slug status posted moderationReason html
  author { id name guest }
  guestDetails { email website network }
  discussion { id title url key }
  parent { author { name } text }
  reports { reason note at }`;

const PAGE_QUERY = `query AdminQueue($queue: ModerationQueue!, $discussion: ID, $first: Int!, $after: String) {
  moderationQueue(queue: $queue, discussionId: $discussion, first: $first, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { ${ITEM} }
  }
}`;

const COUNTS_QUERY = `query AdminQueueCounts($discussion: ID) {
  PENDING: moderationQueue(queue: PENDING, discussionId: $discussion, first: 1) { totalCount }
  REPORTED: moderationQueue(queue: REPORTED, discussionId: $discussion, first: 1) { totalCount }
  REJECTED: moderationQueue(queue: REJECTED, discussionId: $discussion, first: 1) { totalCount }
}`;

const ONE_QUERY = `query AdminQueueItem($discussion: ID!, $slug: String!) {
  comment(discussionId: $discussion, slug: $slug) { ${ITEM} }
}`;

const APPROVE = `mutation AdminApprove($discussion: ID!, $slug: String!) {
  approveComment(discussionId: $discussion, slug: $slug) { slug status }
}`;

const REJECT = `mutation AdminReject($discussion: ID!, $slug: String!, $reason: String) {
  rejectComment(discussionId: $discussion, slug: $slug, reason: $reason) { slug status }
}`;

const CHANGED = `subscription AdminQueueChanged($discussion: ID) {
  moderationQueueChanged(discussionId: $discussion) { discussionId slug queue event }
}`;

const REPORT_REASONS = { SPAM: 'Spam', ABUSE: 'Abuse', OFF_TOPIC: 'Off topic', OTHER: 'Other' };

// The key of a comment in the lists: its discussion and slug.
const keyOf = (discussionId, slug) => `${discussionId}/${slug}`;

// The author's name, for announcements.
const nameOf = (comment) => comment.author?.name ?? 'an unknown author';

export class QueueView {
  // `ctx`: `api`, `live`, `openHistory(author, back)`.
  constructor(ctx) {
    this.ctx = ctx;
    this.queue = 'PENDING';
    this.filter = null;
    // Shown comments by key: `{ comment, item, article, checkbox }`, in list order in the DOM.
    this.shown = new Map();
    this.page = null;
    this.current = null;
    this.selected = new Set();
    this.loading = null;
    this.countsTimer = null;
    this.busy = new Set();
    this.list = document.getElementById('queue-items');
    this.more = document.getElementById('queue-more');
    this.empty = document.getElementById('queue-empty');
    this.panel = document.getElementById('queue-panel');
    this.selectAll = document.getElementById('select-all');
    this.bulkApprove = document.getElementById('bulk-approve');
    this.bulkReject = document.getElementById('bulk-reject');
    this.tabs = QUEUES.map((queue) => document.getElementById(`tab-${queue}`));
    this.wire();
  }

  wire() {
    for (const tab of this.tabs) {
      tab.addEventListener('click', () => this.open(tab.dataset.queue));
      tab.addEventListener('keydown', (event) => {
        const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
        if (step) {
          event.preventDefault();
          const next = this.tabs[(this.tabs.indexOf(tab) + step + this.tabs.length) % this.tabs.length];
          next.focus();
          this.open(next.dataset.queue);
        }
      });
    }
    this.more.addEventListener('click', () => this.loadMore());
    this.selectAll.addEventListener('change', () => {
      const on = this.selectAll.checked;
      for (const [key, shown] of this.shown) {
        shown.checkbox.checked = on;
        this.select(key, on, false);
      }
      this.updateFooter();
    });
    this.bulkApprove.addEventListener('click', () => this.bulk('approve'));
    this.bulkReject.addEventListener('click', () => this.bulk('reject'));
    document.getElementById('queue-filter').addEventListener('submit', (event) => {
      event.preventDefault();
      this.filterBy(document.getElementById('queue-filter-input').value.trim());
    });
    document.getElementById('queue-filter-clear').addEventListener('click', () => this.setFilter(null));
    this.list.addEventListener('focusin', (event) => {
      const item = event.target.closest('.item');
      if (item) {
        this.setCurrent(item.dataset.key);
      }
    });
  }

  // Shows the queue view: counts and the open tab read afresh, and live changes followed.
  async show() {
    this.follow();
    this.refreshCounts();
    await this.reload();
  }

  // Opens a tab.
  async open(queue) {
    if (queue === this.queue && this.page) {
      return;
    }
    this.queue = queue;
    for (const tab of this.tabs) {
      const selected = tab.dataset.queue === queue;
      tab.setAttribute('aria-selected', String(selected));
      tab.tabIndex = selected ? 0 : -1;
    }
    this.panel.setAttribute('aria-labelledby', `tab-${queue}`);
    await this.reload();
  }

  // Filters to the discussion with this id or key (empty: every discussion).
  async filterBy(text) {
    if (text === '') {
      await this.setFilter(null);
      return;
    }
    try {
      const discussion = await findDiscussion(this.ctx.api, text);
      await this.setFilter(discussion);
    } catch (err) {
      showError(`No filter on ${JSON.stringify(text)}`, err);
    }
  }

  // Filters to `discussion` (`{ id, title }`), or shows every discussion (null).
  async setFilter(discussion) {
    this.filter = discussion ? { id: discussion.id, title: discussion.title } : null;
    document.getElementById('queue-filter-input').value = discussion ? (discussion.key ?? discussion.id) : '';
    document.getElementById('queue-filter-clear').hidden = !discussion;
    document.getElementById('queue-filter-state').textContent = discussion
      ? `Only the discussion "${discussion.title}" (${discussion.id})`
      : 'Every discussion';
    announce(discussion ? `Queue filtered to ${discussion.title}` : 'Queue shows every discussion');
    this.follow();
    this.refreshCounts();
    await this.reload();
  }

  // Subscribes to the queues' changes (in the filtered discussion, or everywhere).
  follow() {
    const variables = { discussion: this.filter?.id ?? null };
    this.ctx.live.subscribe('queue', CHANGED, variables, (data) => {
      this.changed(data.moderationQueueChanged);
    }, (err) => {
      if (err.code === 'EVENTS_MISSED') {
        // Some changes were missed: the queue is read again.
        this.resumed();
      } else {
        showError('Live queue updates', err);
      }
    });
  }

  // After the live connection dropped and came back: what changed meanwhile is read again.
  resumed() {
    this.refreshCounts();
    this.reload();
  }

  // Reads the tab counts soon (several changes at once cost one read).
  refreshCounts() {
    clearTimeout(this.countsTimer);
    this.countsTimer = setTimeout(() => this.loadCounts(), 100);
  }

  async loadCounts() {
    try {
      const data = await this.ctx.api.run(COUNTS_QUERY, { discussion: this.filter?.id ?? null });
      for (const queue of QUEUES) {
        document.getElementById(`count-${queue}`).textContent = String(data[queue]?.totalCount ?? 0);
      }
    } catch (err) {
      showError('The queue counts could not be read', err);
    }
  }

  // Reads the open tab from its start.
  async reload() {
    const loading = {};
    this.loading = loading;
    this.panel.setAttribute('aria-busy', 'true');
    try {
      const data = await this.ctx.api.run(PAGE_QUERY, {
        queue: this.queue,
        discussion: this.filter?.id ?? null,
        first: PAGE_SIZE,
        after: null,
      });
      if (this.loading !== loading) {
        return;
      }
      this.shown.clear();
      this.selected.clear();
      this.current = null;
      this.list.replaceChildren();
      this.addPage(data.moderationQueue);
    } catch (err) {
      if (this.loading === loading) {
        showError('The queue could not be read', err);
      }
    } finally {
      if (this.loading === loading) {
        this.loading = null;
        this.panel.setAttribute('aria-busy', 'false');
      }
    }
  }

  // The next page, appended: focus and scroll stay where they are.
  async loadMore() {
    if (!this.page?.hasNextPage) {
      return;
    }
    this.more.disabled = true;
    const queue = this.queue;
    try {
      const data = await this.ctx.api.run(PAGE_QUERY, {
        queue,
        discussion: this.filter?.id ?? null,
        first: PAGE_SIZE,
        after: this.page.endCursor,
      });
      if (queue !== this.queue) {
        return;
      }
      const hadFocus = document.activeElement === this.more;
      const first = this.addPage(data.moderationQueue);
      if (hadFocus && this.more.hidden && first) {
        this.shown.get(first)?.article.focus();
      }
    } catch (err) {
      showError('More of the queue could not be read', err);
    } finally {
      this.more.disabled = false;
    }
  }

  // Adds a page of comments before those that arrived live; returns the key of the first added.
  addPage(connection) {
    let first = null;
    const live = this.list.querySelector(':scope > .item.arrived');
    for (const comment of connection?.nodes ?? []) {
      const key = keyOf(comment.discussionId, comment.slug);
      if (this.shown.has(key)) {
        continue;
      }
      this.list.insertBefore(this.render(comment), live);
      first ??= key;
    }
    this.page = connection?.pageInfo ?? { hasNextPage: false, endCursor: null };
    this.updateFooter();
    return first;
  }

  // A change heard live: a comment entered the open tab (shown at the end), or left it (removed).
  async changed(change) {
    if (!change) {
      return;
    }
    this.refreshCounts();
    const key = keyOf(change.discussionId, change.slug);
    const inFilter = !this.filter || this.filter.id === change.discussionId;
    const belongs = change.queue === this.queue && inFilter;
    if (!belongs) {
      if (this.shown.has(key) && !this.busy.has(key)) {
        const name = nameOf(this.shown.get(key).comment);
        this.remove(key);
        announce(`The comment by ${name} left the queue`);
      }
      return;
    }
    if (this.shown.has(key)) {
      return;
    }
    try {
      const data = await this.ctx.api.run(ONE_QUERY, { discussion: change.discussionId, slug: change.slug });
      const comment = data.comment;
      if (!comment || this.shown.has(key) || change.queue !== this.queue) {
        return;
      }
      const item = this.render(comment);
      item.classList.add('arrived');
      this.list.append(item);
      this.updateFooter();
      announce(`New in the queue: a comment by ${nameOf(comment)}`);
    } catch (err) {
      showError('A comment new in the queue could not be read', err);
    }
  }

  // One comment of the queue.
  render(comment) {
    const key = keyOf(comment.discussionId, comment.slug);
    const id = uid('item');
    const name = nameOf(comment);
    const checkbox = el('input', { type: 'checkbox', id: `${id}-select` });
    const head = el(
      'div',
      { class: 'item-head' },
      checkbox,
      el('label', { for: `${id}-select`, class: 'visually-hidden', text: `Select the comment by ${name}` }),
      el('h3', { id: `${id}-title` }, el('span', { class: 'author', text: name })),
      comment.author?.guest ? el('span', { class: 'badge guest', text: 'guest' }) : null,
      comment.status !== 'APPROVED' ? el('span', { class: 'badge', text: comment.status.toLowerCase() }) : null,
    );
    const guest = comment.guestDetails ? this.renderGuest(comment.guestDetails, id) : null;
    const discussion = comment.discussion;
    const meta = el(
      'p',
      { class: 'meta' },
      'Posted ',
      time(comment.posted),
      discussion ? ' in ' : null,
      discussion ? link(discussion.url, discussion.title) : null,
    );
    const parent = comment.parent
      ? el(
        'blockquote',
        { class: 'context', 'aria-label': 'The comment it replies to' },
        el('p', {}, 'In reply to ', el('span', { class: 'author', text: comment.parent.author?.name ?? '' })),
        el('p', { text: comment.parent.text === null ? '(deleted)' : cut(comment.parent.text, 300) }),
      )
      : null;
    const body = el('div', { class: 'body' });
    if (comment.html === null || comment.html === undefined) {
      body.append(el('p', { class: 'muted', text: '(no text: deleted)' }));
    } else {
      body.append(cleanHtml(comment.html));
    }
    const reports = comment.reports?.length
      ? el(
        'ul',
        { class: 'reports', 'aria-label': 'Reports' },
        ...comment.reports.map((report) => el(
          'li',
          {},
          el('strong', { text: REPORT_REASONS[report.reason] ?? report.reason }),
          report.note ? `: ${report.note}` : '',
          ' (',
          time(report.at),
          ')',
        )),
      )
      : null;
    const reason = comment.moderationReason
      ? el('p', { class: 'meta reason', text: `Reason given: ${comment.moderationReason}` })
      : null;
    const button = (text, shortcut, action) => {
      const b = el('button', { type: 'button', 'aria-keyshortcuts': shortcut, 'aria-describedby': `${id}-title`, text });
      b.addEventListener('click', () => this.act(action, key));
      return b;
    };
    const actions = el(
      'div',
      { class: 'actions' },
      button('Approve', 'a', 'approve'),
      button('Reject…', 'r', 'reject'),
      button('Ban author…', 'b', 'ban'),
      button('History', 'h', 'history'),
    );
    const article = el('article', { tabindex: '-1', 'aria-labelledby': `${id}-title` }, head, meta, guest, parent, body, reports, reason, actions);
    const item = el('li', { class: 'item', 'data-key': key }, article);
    checkbox.addEventListener('change', () => this.select(key, checkbox.checked));
    this.shown.set(key, { comment, item, article, checkbox });
    return item;
  }

  // What a guest gave with the comment (moderators only): email, website, and the network it
  // came from, with a way to ban that network.
  renderGuest(details, id) {
    const website = details.website ? link(details.website, details.website) : el('span', { class: 'muted', text: 'none given' });
    const ban = el('button', { type: 'button', 'aria-describedby': `${id}-title`, text: 'Ban network…' });
    ban.addEventListener('click', () => this.ctx.banNetwork(details.network));
    return el(
      'dl',
      { class: 'fields guest-details', 'aria-label': 'What the guest gave' },
      el('dt', { text: 'Email' }),
      el('dd', { text: details.email ?? 'none given' }),
      el('dt', { text: 'Website' }),
      el('dd', {}, website),
      el('dt', { text: 'Network' }),
      el('dd', {}, el('code', { text: details.network }), ' ', ban),
    );
  }

  // Selects the comment `key` or not; the footer says so unless `update` is false.
  select(key, on, update = true) {
    const shown = this.shown.get(key);
    if (on && shown) {
      this.selected.add(key);
    } else {
      this.selected.delete(key);
    }
    shown?.item.classList.toggle('selected', on);
    if (update) {
      this.updateFooter();
    }
  }

  // The list's footer and the bulk bar, after any change of the list.
  updateFooter() {
    this.more.hidden = !this.page?.hasNextPage;
    this.empty.hidden = this.shown.size > 0;
    const n = this.selected.size;
    this.bulkApprove.disabled = n === 0;
    this.bulkReject.disabled = n === 0;
    this.bulkApprove.textContent = n > 0 ? `Approve selected (${n})` : 'Approve selected';
    this.bulkReject.textContent = n > 0 ? `Reject selected (${n})` : 'Reject selected';
    document.getElementById('selected-count').textContent = n === 0 ? 'None selected' : `${n} selected`;
    this.selectAll.checked = n > 0 && n === this.shown.size;
  }

  setCurrent(key) {
    if (this.current === key) {
      return;
    }
    this.shown.get(this.current)?.item.classList.remove('current');
    this.current = this.shown.has(key) ? key : null;
    this.shown.get(this.current)?.item.classList.add('current');
  }

  // The key of the comment after `key` in the list, else the one before it, else null.
  neighbour(key) {
    const item = this.shown.get(key)?.item;
    const next = item?.nextElementSibling ?? item?.previousElementSibling;
    return next?.dataset.key ?? null;
  }

  // Focuses the comment `key` (null: the list itself, when it is empty).
  focus(key) {
    const shown = this.shown.get(key);
    if (shown) {
      shown.article.focus();
      shown.article.scrollIntoView({ block: 'nearest' });
    } else {
      this.panel.focus();
    }
  }

  // Removes a comment from the list; focus moves to its neighbour when it was on it.
  remove(key) {
    const shown = this.shown.get(key);
    if (!shown) {
      return;
    }
    const next = this.neighbour(key);
    const focused = shown.item.contains(document.activeElement) || document.activeElement === document.body;
    shown.item.remove();
    this.shown.delete(key);
    this.selected.delete(key);
    if (this.current === key) {
      this.current = null;
      this.setCurrent(next);
    }
    if (focused) {
      this.focus(next);
    }
    this.updateFooter();
  }

  // j / k: the next or previous comment.
  move(step) {
    const keys = [...this.list.children].map((item) => item.dataset.key);
    if (keys.length === 0) {
      return;
    }
    const at = keys.indexOf(this.current);
    const to = at === -1 ? (step > 0 ? 0 : keys.length - 1) : Math.min(Math.max(at + step, 0), keys.length - 1);
    this.focus(keys[to]);
  }

  // An action on the current comment (from a key).
  actOnCurrent(action) {
    if (this.current && this.shown.has(this.current)) {
      this.act(action, this.current);
    }
  }

  // An action on one comment: approve, reject (asks why), ban its author, open their history.
  async act(action, key) {
    const shown = this.shown.get(key);
    if (!shown || this.busy.has(key)) {
      return;
    }
    const { comment, article } = shown;
    const name = nameOf(comment);
    if (action === 'history') {
      this.ctx.openHistory(comment.author, article);
      return;
    }
    if (action === 'ban') {
      await banAuthor(this.ctx, comment.author, article);
      return;
    }
    let reason = null;
    if (action === 'reject') {
      document.getElementById('reject-what').textContent = `The comment by ${name}.`;
      const dialog = document.getElementById('reject-dialog');
      const fields = await ask(dialog, document.getElementById('reject-reason'), article);
      if (!fields) {
        return;
      }
      reason = fields.reason.trim() || null;
    }
    this.busy.add(key);
    try {
      await this.run(action, comment, reason);
      this.remove(key);
      announce(`${action === 'approve' ? 'Approved' : 'Rejected'} comment by ${name}`);
      this.refreshCounts();
    } catch (err) {
      showError(`The comment by ${name} could not be ${action === 'approve' ? 'approved' : 'rejected'}`, err);
    } finally {
      this.busy.delete(key);
    }
  }

  run(action, comment, reason) {
    const variables = { discussion: comment.discussionId, slug: comment.slug };
    return action === 'approve'
      ? this.ctx.api.run(APPROVE, variables)
      : this.ctx.api.run(REJECT, { ...variables, reason });
  }

  // Approves or rejects every selected comment, one after the other; says how many succeeded.
  async bulk(action) {
    const keys = [...this.list.children].map((item) => item.dataset.key).filter((key) => this.selected.has(key));
    if (keys.length === 0) {
      return;
    }
    let reason = null;
    const button = action === 'approve' ? this.bulkApprove : this.bulkReject;
    if (action === 'reject') {
      document.getElementById('reject-what').textContent = `${keys.length} selected ${keys.length === 1 ? 'comment' : 'comments'}.`;
      const fields = await ask(document.getElementById('reject-dialog'), document.getElementById('reject-reason'), button);
      if (!fields) {
        return;
      }
      reason = fields.reason.trim() || null;
    }
    this.bulkApprove.disabled = true;
    this.bulkReject.disabled = true;
    let done = 0;
    let failed = null;
    for (const key of keys) {
      const shown = this.shown.get(key);
      if (!shown) {
        continue;
      }
      this.busy.add(key);
      try {
        await this.run(action, shown.comment, reason);
        done += 1;
        this.remove(key);
      } catch (err) {
        failed = err;
      } finally {
        this.busy.delete(key);
      }
    }
    this.updateFooter();
    const verb = action === 'approve' ? 'Approved' : 'Rejected';
    announce(`${verb} ${done} of ${keys.length} selected comments`);
    if (failed) {
      showError(`${keys.length - done} of ${keys.length} selected comments could not be ${verb.toLowerCase()}`, failed);
    }
    this.refreshCounts();
    this.focus(this.list.firstElementChild?.dataset.key ?? null);
  }
}
