"""Builds bench/quality/knowledge.json: the retrieval-quality set of the knowledge server.

Sixty entries the questions are about (written by hand, one subject each), each with one
question that has it as its only answer; and 480 other entries, made from templates over
engineering subjects, which share words with the questions without answering them. 37 of the
questions are in other words: they share no word (a run of letters and digits, in any case)
with their answer, so keyword search cannot find them, by construction; the other 23 are the
few words a person types into a search box, every one of them in the answer (and some in
other entries too). Deterministic (a fixed seed);
run `python3 bench/quality/make.py > bench/quality/knowledge.json` after editing.
"""

import json
import random
import re

# (entry, question): the question's only answer is the entry.
PAIRS = [
    ("Use connection pooling so the database stays responsive under heavy load.",
     "why are my SQL requests slow when traffic spikes?"),
    ("Rotate API keys every ninety days and never commit secrets to the repository.",
     "how often should credentials get replaced?"),
    ("Keep the on-call runbook next to the alert that pages you.",
     "on-call runbook alert"),
    ("Profile memory before optimising; most leaks come from unbounded caches.",
     "finding out why a program uses too much RAM"),
    ("Write acceptance criteria as Given/When/Then and review them before estimation.",
     "how do product owners specify expected behaviour for a story?"),
    ("Database migrations stay backwards compatible for one release so rollbacks are safe.",
     "can we undo a deploy after changing tables?"),
    ("Validate request bodies at the API boundary and reject unknown fields.",
     "where should incoming payloads be checked?"),
    ("Flaky tests are quarantined within a day and fixed before the sprint ends.",
     "what happens to unreliable checks in continuous integration?"),
    ("Feature flags are removed once the rollout reaches everyone.",
     "when do we delete toggles?"),
    ("Pin dependency versions with a lockfile so builds are reproducible.",
     "how to make compiling give identical results on every machine"),
    ("Log in structured JSON with a request id on every line.",
     "what format should diagnostic output use?"),
    ("Set timeouts on every outbound HTTP call; the default waits forever.",
     "our service hangs when a partner is down"),
    ("Retry only idempotent operations, with exponential backoff and jitter.",
     "which calls may be attempted again after failure?"),
    ("Back up the production database nightly and test a restore every month.",
     "how do we know recovery from data loss works?"),
    ("Use UTC everywhere in storage and convert to local time only for display.",
     "UTC storage"),
    ("Code review needs one approval and passing checks before merging.",
     "code review approval"),
    ("Accessibility: every image needs alt text and every control a label.",
     "how do we support screen readers?"),
    ("Cache invalidation happens on write through a versioned key.",
     "stale values keep showing after an update"),
    ("Paginate list endpoints with cursors, not offsets, for large tables.",
     "returning thousands of rows from a listing endpoint"),
    ("Encrypt personal data at rest and in transit.",
     "protecting customer information stored on disk"),
    ("The release train leaves every Tuesday; late changes wait for the next one.",
     "when do shipments to production happen?"),
    ("Spike tickets are time-boxed to two days and end with a written summary.",
     "how long may research tasks take?"),
    ("Load tests run against a staging copy sized like production.",
     "where do we measure capacity before launch?"),
    ("Error messages say what happened and what the user can do next.",
     "how should failures be explained to people?"),
    ("Dark mode colours must keep a contrast ratio of at least 4.5 to 1.",
     "dark mode contrast ratio"),
    ("Mobile builds are signed in CI; signing keys never leave the vault.",
     "signing keys vault"),
    ("Bug reports include steps to reproduce, expected and actual results.",
     "what should a defect ticket contain?"),
    ("Regression suites run against fixtures, never against production data.",
     "regression fixtures"),
    ("Each service owns its schema; no other service reads its tables directly.",
     "may one microservice query another's storage?"),
    ("Incidents get a blameless postmortem within five working days.",
     "what follows an outage?"),
    ("Use a queue to absorb bursts instead of scaling the web tier for peaks.",
     "queue bursts"),
    ("Indexes are added for every foreign key used in joins.",
     "speeding up lookups across related records"),
    ("Passwords are hashed with Argon2id and a per-user salt.",
     "Argon2id salt"),
    ("Observability: every service exports traces, metrics and logs.",
     "how do we see what is happening inside production systems?"),
    ("Design reviews happen before any project longer than two weeks starts.",
     "when is an architecture proposal discussed?"),
    ("Product metrics are defined before a feature ships, with a target.",
     "product metrics target"),
    ("User interviews are recorded with consent and summarised the same day.",
     "customer research notes"),
    ("Deprecations are announced two releases ahead with a migration guide.",
     "deprecations migration guide"),
    ("Container images are rebuilt weekly to pick up security patches.",
     "keeping docker base layers current"),
    ("Rate limits return 429 with a Retry-After header.",
     "rate limits 429"),
    ("Prefer composition over inheritance in new modules.",
     "composition inheritance"),
    ("Unit tests run in under ten seconds so people run them before every commit.",
     "how fast must the quick checks be?"),
    ("Translations live in resource files; no user-facing text is hard-coded.",
     "translations resource files"),
    ("Background jobs are idempotent and safe to run twice.",
     "worker tasks executed more than once"),
    ("The API is versioned in the URL path and old versions live for a year.",
     "how long do previous interface revisions keep working?"),
    ("Secrets are injected at runtime from the vault, not baked into images.",
     "secrets runtime vault"),
    ("Performance budgets: pages load in under two seconds on a mid-range phone.",
     "performance budgets"),
    ("Analytics events follow the naming scheme object_action, in snake case.",
     "analytics events naming"),
    ("Every pull request updates the changelog when behaviour changes.",
     "changelog pull request"),
    ("Sprint planning caps committed work at eighty percent of capacity.",
     "how much should a team promise per iteration?"),
    ("Canary deploys go to five percent of traffic for an hour first.",
     "canary deploys traffic"),
    ("Search queries are logged without personal data to tune ranking.",
     "improving relevance of lookups while respecting privacy"),
    ("Exploratory testing sessions are time-boxed and charter-driven.",
     "exploratory testing"),
    ("Test data is generated by factories, not copied from customers.",
     "test data factories"),
    ("Dependencies with known vulnerabilities block the build.",
     "stopping risky third party packages"),
    ("Webhooks are signed with HMAC so receivers can verify the sender.",
     "webhooks HMAC"),
    ("Dashboards show the four golden signals for each service.",
     "latency errors saturation traffic views"),
    ("Product requirements documents name the problem before the solution.",
     "what comes first in a spec written by PMs?"),
    ("Chaos experiments run monthly in staging to test resilience.",
     "chaos experiments staging"),
    ("Customer support tickets tagged bug are triaged by QA within one day.",
     "support tickets triaged"),
]

SUBJECTS = [
    "the billing service", "the search index", "the mobile app", "the admin console",
    "the data warehouse", "the login page", "the notification system", "the import pipeline",
    "the reporting module", "the public API", "the design system", "the checkout flow",
    "the onboarding wizard", "the export job", "the audit log", "the recommendation engine",
]
ACTIONS = [
    "documents its configuration in the README", "keeps its owners listed in CODEOWNERS",
    "is deployed by the platform team", "reports its usage to the analytics team",
    "has a weekly sync with stakeholders", "tracks its open questions in the wiki",
    "uses the shared component library", "publishes release notes to the forum",
    "runs a quarterly review of its roadmap", "keeps a glossary of its domain terms",
    "labels its issues by area and priority", "names its branches after ticket numbers",
    "archives old tickets after ninety days", "collects feedback through a survey",
    "keeps screenshots of every state in the design file", "lists its known limitations",
    "has its diagrams in the architecture folder", "hands over to support with a checklist",
    "tracks adoption in a monthly report", "keeps its dashboards in the team space",
    "has a contact in the legal team for terms", "stores meeting notes in the shared drive",
    "prints a summary of its jobs each morning", "writes a retrospective after each quarter",
    "owns a budget line in the finance plan", "reviews its naming with the writers",
    "uses the same icon set as the website", "tags its metrics with the team name",
    "keeps a list of customers who asked for features", "shares a calendar for its meetings",
]
ROLES = ["pm", "dev", "qa", "all"]


def words(text):
    return {w.lower() for w in re.findall(r"[^\W_]+", text)}


def main():
    rng = random.Random(58)
    entries = []
    queries = []
    for i, (entry, question) in enumerate(PAIRS):
        eid = f"e{i:03d}"
        entries.append({"id": eid, "content": entry, "role": ROLES[i % 4]})
        queries.append({
            "query": question,
            "answer": eid,
            "shares_no_word": not (words(entry) & words(question)),
        })
    combos = [(s, a) for s in SUBJECTS for a in ACTIONS]
    rng.shuffle(combos)
    for i, (s, a) in enumerate(combos[:480]):
        text = f"{s[0].upper()}{s[1:]} {a}."
        entries.append({"id": f"d{i:03d}", "content": text, "role": ROLES[rng.randrange(4)]})
    rng.shuffle(entries)
    none = sum(q["shares_no_word"] for q in queries)
    assert len(entries) >= 500 and len(queries) >= 50 and none * 3 >= len(queries), none
    for (entry, question), q in zip(PAIRS, queries):
        assert q["shares_no_word"] or words(question) <= words(entry), question
    json.dump({"entries": entries, "queries": queries}, __import__("sys").stdout, indent=1)
    print()


main()
