"""py-stats: summary statistics with Python's standard library."""

import statistics
from dataclasses import dataclass
from typing import List, Optional

import skillhost

skill = skillhost.Skill()


@dataclass
class DescribeArgs:
    numbers: List[float]
    precision: Optional[int] = 6


# Called at build time (the SDK's warm-up): every instance starts with
# this path already run, its code specialised and its caches filled.
@skill.tool("stats.describe", warm_up=[{"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}])
def describe(args: DescribeArgs) -> dict:
    if not args.numbers:
        raise skillhost.InvalidInput("field `numbers`: needs at least one number")
    digits = 6 if args.precision is None else args.precision
    data = args.numbers
    stdev = round(statistics.stdev(data), digits) if len(data) > 1 else None
    return {
        "count": len(data),
        "mean": round(statistics.fmean(data), digits),
        "median": round(statistics.median(data), digits),
        "stdev": stdev,
        "min": min(data),
        "max": max(data),
    }


Tools = skill.tools()
