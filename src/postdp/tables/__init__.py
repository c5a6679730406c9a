"""Tables: a histogram over a category tree for every geounit of a hierarchy.

A :class:`Table` crosses a geography (a :class:`~postdp.Hierarchy` of geounits) with a
category tree (e.g. the 2020 redistricting table P1: Total > one race / two or more races >
63 detailed cells), or with a :class:`Schema` of several attributes (the persons file's
2,016 cells), whose category tree is :meth:`Schema.categories` and whose marginals are
:meth:`Query.marginal` (:func:`rounding_plan` says what a rounding promises for each
marginal, nested or crossing). A :class:`Workload` says which category queries are measured
at which geographic level with which mechanism; :func:`measure` draws their noisy answers,
and :func:`postdp.project` makes them consistent both ways. A hierarchy of counts is the
one-cell table: :func:`add_noise` draws the noise of its nodes, level by level. The 2020
redistricting schemas (:func:`pl94_schema`, :func:`p1_schema`, :func:`units_schema`), the
DHC persons schema and its edits (:func:`dhc_schema`, :func:`dhc_structural_zeros`) and the
2020 production strategies as presets (:func:`load_strategy`: a :class:`Strategy` gives the
workload of a table) are here too.
"""

from postdp.tables._noise import NoisyCounts, TableMeasurements, add_noise, measure
from postdp.tables._table import Table, category_matrix, expand
from postdp.tables.bounds import CountBounds, check_bounds
from postdp.tables.bypass import single_child_bypass
from postdp.tables.dhc import DHC_EDITS, Edit, dhc_schema, dhc_structural_zeros
from postdp.tables.pl94 import p1_schema, pl94_schema, units_schema
from postdp.tables.published import Block, PublishedTable
from postdp.tables.rounding_plan import RoundingPlan, rounding_plan
from postdp.tables.schema import Attribute, Marginal, Recode, Schema
from postdp.tables.spine import FANOUT_CUTOFF, aian_branches, optimised_block_groups
from postdp.tables.strategies import Strategy, load_strategy
from postdp.tables.workload import Measurement, Query, Workload

__all__ = [
    "DHC_EDITS",
    "FANOUT_CUTOFF",
    "Attribute",
    "Block",
    "CountBounds",
    "Edit",
    "Marginal",
    "Measurement",
    "NoisyCounts",
    "PublishedTable",
    "Query",
    "Recode",
    "RoundingPlan",
    "Schema",
    "Strategy",
    "Table",
    "TableMeasurements",
    "Workload",
    "add_noise",
    "aian_branches",
    "category_matrix",
    "check_bounds",
    "dhc_schema",
    "dhc_structural_zeros",
    "expand",
    "load_strategy",
    "measure",
    "optimised_block_groups",
    "p1_schema",
    "pl94_schema",
    "rounding_plan",
    "single_child_bypass",
    "units_schema",
]
