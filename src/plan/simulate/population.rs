//! Who the simulated calls go to: the workload's population scaled down to what the calls need,
//! with the busiest entity of a family taking exactly the plan's share of them (skew × its even
//! share of the *full* population) and the rest spread evenly over the scaled population, and
//! every call of the window laid out second by second before it starts (so the counts are
//! exact, and setup knows how many copies and patrons to make).

use super::super::Workload;

/// The most entities of a kind the simulation makes: a family needing more keys than this to
/// show its busiest one is below the simulation's resolution anyway (a patron's among millions).
pub const MAX_SCALED: usize = 200;
/// A standard patron's loan limit (`Tier::loan_limit`): each simulated patron borrows at most
/// this many.
pub const LOANS_PER_PATRON: usize = 5;

/// Picks entity `0` (the busiest) for exactly its share of the picks, the others in turn.
#[derive(Debug, Clone)]
pub struct Spread {
    share: f64,
    count: usize,
    owed: f64,
    next: usize,
}

impl Spread {
    /// `full` entities in the workload (none given: one, as the plan takes it), `skew` times an
    /// even share for the busiest.
    pub fn new(full: Option<f64>, skew: f64) -> Self {
        let full = full.unwrap_or(1.0).max(1.0);
        let share = (skew / full).min(1.0);
        // Enough that no other entity takes more than the busiest: 1/share of them.
        let count = if share >= 1.0 {
            1
        } else {
            (full.min((1.0 / share).ceil()) as usize).clamp(2, MAX_SCALED)
        };
        Spread {
            share,
            count,
            // Starts half owed, so that n picks give the busiest round(n × share).
            owed: 0.5,
            next: 0,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn pick(&mut self) -> usize {
        if self.count == 1 {
            return 0;
        }
        self.owed += self.share;
        if self.owed >= 1.0 {
            self.owed -= 1.0;
            return 0;
        }
        let picked = 1 + self.next % (self.count - 1);
        self.next += 1;
        picked
    }
}

/// Calls of one route in each second: `rate` a second over `seconds`, exactly
/// round(rate × seconds) in all.
pub fn per_second(rate: f64, seconds: u32) -> Vec<usize> {
    (0..seconds)
        .map(|t| {
            let by = |t: u32| (rate * f64::from(t)).round() as usize;
            by(t + 1) - by(t)
        })
        .collect()
}

/// A checkout's branch and book (their indexes in the scaled population).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lend {
    pub branch: usize,
    pub book: usize,
}

/// Everything the window issues, and what setup makes for it.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub branches: usize,
    pub books: usize,
    /// Loans lent in setup, returned in the window in this order.
    pub lent_before: Vec<Lend>,
    /// Each second's checkouts.
    pub checkouts: Vec<Vec<Lend>>,
    /// Each second's returns (how many: they take `lent_before` in order).
    pub returns: Vec<usize>,
    /// Each second's book reads (`get-book`), by book.
    pub book_reads: Vec<Vec<usize>>,
    /// The due loans the marker marks, by branch.
    pub due: Vec<usize>,
}

impl Schedule {
    /// `rates`: the calls a second of checkout-book, return-book and get-book.
    pub fn new(workload: &Workload, rates: [f64; 3], seconds: u32) -> Schedule {
        let [checkouts, returns, reads] = rates;
        let mut branch = Spread::new(Some(workload.branches), workload.skew);
        let mut book = Spread::new(workload.books, workload.skew);
        let (branches, books) = (branch.count(), book.count());
        let mut lend = || Lend {
            branch: branch.pick(),
            book: book.pick(),
        };
        let returns = per_second(returns, seconds);
        let lent_before = (0..returns.iter().sum::<usize>()).map(|_| lend()).collect();
        let checkouts = per_second(checkouts, seconds)
            .into_iter()
            .map(|n| (0..n).map(|_| lend()).collect())
            .collect();
        let mut read = Spread::new(workload.books, workload.skew);
        let book_reads = per_second(reads, seconds)
            .into_iter()
            .map(|n| (0..n).map(|_| read.pick()).collect())
            .collect();
        let mut due_branch = Spread::new(Some(workload.branches), workload.skew);
        let marked = workload
            .overdue_marked_per_run
            .min(workload.max_key_wcu * f64::from(seconds))
            .floor() as usize;
        let due = (0..marked).map(|_| due_branch.pick()).collect();
        Schedule {
            branches,
            books,
            lent_before,
            checkouts,
            returns,
            book_reads,
            due,
        }
    }

    /// Every loan lent, in setup and in the window.
    pub fn all_lent(&self) -> impl Iterator<Item = &Lend> {
        self.lent_before
            .iter()
            .chain(self.checkouts.iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_takes_exactly_its_share_and_no_other_more() {
        // 1,000 branches, skew 10: the busiest takes 1 %, spread over 100 scaled branches.
        let mut spread = Spread::new(Some(1_000.0), 10.0);
        assert_eq!(spread.count(), 100);
        let mut picks = vec![0; spread.count()];
        for _ in 0..1_000 {
            picks[spread.pick()] += 1;
        }
        assert_eq!(picks[0], 10);
        assert!(picks.iter().all(|n| *n <= 11), "{picks:?}");
        // No number given: one, taking every call.
        let mut one = Spread::new(None, 10.0);
        assert_eq!((one.count(), one.pick(), one.pick()), (1, 0, 0));
    }

    #[test]
    fn a_rate_over_the_window_is_issued_exactly() {
        let calls = per_second(27.777_777, 20);
        assert_eq!(calls.iter().sum::<usize>(), 556);
        assert!(calls.iter().all(|n| *n == 27 || *n == 28));
    }
}
