"""Privacy accounting: the ledger of releases, its budget cap and the privacy statement.

A secure release spends privacy; a repeated one spends it again. :class:`Ledger` records
every release of the library's secure paths (:meth:`Mechanism.release
<postdp.mechanisms.Mechanism.release>`, :func:`postdp.tables.measure` with ``secure=True``,
:func:`postdp.nmf.write`, each given ``ledger=``) and of the command line (``postdp release``,
``postdp measure``; ``--ledger``, ``--budget-cap``) as one JSON line per release in one file,
and refuses a release that would pass its cap before any noise is drawn
(:class:`~postdp.errors.BudgetCapError`). :func:`statement` and :func:`write_statement` make
and write the privacy statement that goes with a published output.

A record holds digests of its input, never a count: :func:`array_content`,
:func:`hierarchy_content`, :func:`table_content` and :func:`multiset_digest` make them, and
:func:`spent_on` adds up what a ledger records for one input (:data:`CONTENT_KEY`). A long
draw made without the ledger's lock reserves its budget first (:func:`reserve`). The
ledger's lock is :func:`held`.
"""

from postdp.privacy._content import (
    array_content,
    hierarchy_content,
    multiset_digest,
    table_content,
)
from postdp.privacy._ledger import (
    CONTENT_KEY,
    LEDGER_NAME,
    PUBLISHED,
    RESERVED,
    UNPUBLISHED,
    WITHDRAWN,
    Ledger,
    LedgerUse,
    Spent,
    append,
    check_writable,
    default_path,
    new_reservation,
    over_cap,
    read,
    same_input,
    spent_on,
    truncate,
)
from postdp.privacy._lock import held, holder_of, lock
from postdp.privacy._reservations import NotRecordedError, Reservation, reserve
from postdp.privacy._statement import (
    STATEMENT_DELTAS,
    statement,
    statement_path,
    write_statement,
)

__all__ = [
    "CONTENT_KEY",
    "LEDGER_NAME",
    "PUBLISHED",
    "RESERVED",
    "STATEMENT_DELTAS",
    "UNPUBLISHED",
    "WITHDRAWN",
    "Ledger",
    "LedgerUse",
    "NotRecordedError",
    "Reservation",
    "Spent",
    "append",
    "array_content",
    "check_writable",
    "default_path",
    "held",
    "hierarchy_content",
    "holder_of",
    "lock",
    "multiset_digest",
    "new_reservation",
    "over_cap",
    "read",
    "reserve",
    "same_input",
    "spent_on",
    "statement",
    "statement_path",
    "table_content",
    "truncate",
    "write_statement",
]
