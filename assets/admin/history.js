// The author's history: a drawer (a modal dialog: Escape closes it) with their standing (counts
// and ban, with ban and unban) and their comments across discussions, newest first, held ones
// included, paged by "Load more".

import { describe } from './api.js';
import { banAuthor, unbanAuthor } from './bans.js';
import { cleanHtml, el, link, time, timeText } from './dom.js';

const PAGE_SIZE = 10;

const COMMENTS = `commentsByAuthor(userId: $user, first: $first, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { discussionId slug status posted deleted html discussion { title url } }
  }`;

const STANDING = `authorStanding(userId: $user) {
    comments approved rejected reported
    ban { until reason at by { name } }
  }`;

const OPEN_QUERY = `query AdminHistory($user: ID!, $first: Int!, $after: String) { ${STANDING} ${COMMENTS} }`;
const MORE_QUERY = `query AdminHistoryMore($user: ID!, $first: Int!, $after: String) { ${COMMENTS} }`;
const STANDING_QUERY = `query AdminStanding($user: ID!) { ${STANDING} }`;

export class HistoryDrawer {
  constructor(ctx) {
    this.ctx = ctx;
    this.author = null;
    this.back = null;
    this.page = null;
    this.dialog = document.getElementById('history');
    this.items = document.getElementById('history-items');
    this.more = document.getElementById('history-more');
    this.error = document.getElementById('history-error');
    this.banButton = document.getElementById('history-ban');
    this.unbanButton = document.getElementById('history-unban');
    document.getElementById('history-close').addEventListener('click', () => this.dialog.close());
    this.dialog.addEventListener('close', () => {
      this.author = null;
      if (this.back?.isConnected) {
        this.back.focus();
      }
    });
    this.more.addEventListener('click', () => this.loadMore());
    this.banButton.addEventListener('click', async () => {
      const author = this.author;
      if (author && await banAuthor(this.ctx, author, this.banButton)) {
        await this.loadStanding(author, this.unbanButton);
      }
    });
    this.unbanButton.addEventListener('click', async () => {
      const author = this.author;
      if (author && await unbanAuthor(this.ctx, author)) {
        await this.loadStanding(author, this.banButton);
      }
    });
  }

  get isOpen() {
    return this.dialog.open;
  }

  // Opens the drawer on `author` (`{ id, name }`); focus goes back to `back` when it closes.
  async open(author, back) {
    this.author = author;
    this.back = back;
    this.page = null;
    document.getElementById('history-title').textContent = `History of ${author.name} (${author.id})`;
    document.getElementById('standing-counts').replaceChildren();
    document.getElementById('standing-ban').textContent = '';
    this.items.replaceChildren();
    this.more.hidden = true;
    this.error.textContent = '';
    this.dialog.setAttribute('aria-busy', 'true');
    if (!this.dialog.open) {
      this.dialog.showModal();
    }
    document.getElementById('history-close').focus();
    try {
      const data = await this.ctx.api.run(OPEN_QUERY, { user: author.id, first: PAGE_SIZE, after: null });
      if (this.author !== author) {
        return;
      }
      this.showStanding(data.authorStanding);
      this.addPage(data.commentsByAuthor);
    } catch (err) {
      if (this.author === author) {
        this.error.textContent = `The history could not be read: ${describe(err)}`;
      }
    } finally {
      this.dialog.setAttribute('aria-busy', 'false');
    }
  }

  async loadStanding(author, focus) {
    try {
      const data = await this.ctx.api.run(STANDING_QUERY, { user: author.id });
      if (this.author === author) {
        this.showStanding(data.authorStanding);
        (focus.hidden ? this.banButton : focus).focus();
      }
    } catch (err) {
      this.error.textContent = `The standing could not be read: ${describe(err)}`;
    }
  }

  showStanding(standing) {
    const counts = [
      ['Comments', standing.comments],
      ['Approved', standing.approved],
      ['Rejected', standing.rejected],
      ['Reported', standing.reported],
    ];
    document.getElementById('standing-counts').replaceChildren(...counts.flatMap(([label, n]) =>
      [el('dt', { text: label }), el('dd', { text: String(n) })]));
    const ban = standing.ban;
    document.getElementById('standing-ban').textContent = ban
      ? `Banned ${ban.until ? `until ${timeText(ban.until)}` : 'for good'}${ban.reason ? `: ${ban.reason}` : ''} (by ${ban.by?.name ?? 'a moderator'}, ${timeText(ban.at)})`
      : 'Not banned.';
    this.unbanButton.hidden = !ban;
    this.banButton.textContent = ban ? 'Ban again…' : 'Ban…';
  }

  async loadMore() {
    const author = this.author;
    if (!author || !this.page?.hasNextPage) {
      return;
    }
    this.more.disabled = true;
    try {
      const data = await this.ctx.api.run(MORE_QUERY, { user: author.id, first: PAGE_SIZE, after: this.page.endCursor });
      if (this.author === author) {
        this.addPage(data.commentsByAuthor);
      }
    } catch (err) {
      this.error.textContent = `More of the history could not be read: ${describe(err)}`;
    } finally {
      this.more.disabled = false;
    }
  }

  addPage(connection) {
    for (const comment of connection?.nodes ?? []) {
      this.items.append(this.render(comment));
    }
    this.page = connection?.pageInfo ?? { hasNextPage: false, endCursor: null };
    this.more.hidden = !this.page.hasNextPage;
    document.getElementById('history-empty').hidden = this.items.children.length > 0;
  }

  render(comment) {
    const body = el('div', { class: 'body' });
    if (comment.deleted || comment.html === null || comment.html === undefined) {
      body.append(el('p', { class: 'muted', text: 'This comment was deleted.' }));
    } else {
      body.append(cleanHtml(comment.html));
    }
    const title = comment.discussion?.title ?? comment.discussionId;
    return el(
      'li',
      { 'data-slug': comment.slug },
      el(
        'p',
        { class: 'meta' },
        el('span', { class: 'badge', text: comment.status.toLowerCase() }),
        ' ',
        time(comment.posted),
        ' in ',
        link(comment.discussion?.url, title),
      ),
      body,
    );
  }
}
