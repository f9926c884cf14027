package recall

// Qualifiers of the object. Two goals with the same action on the same
// object can still be two tasks when they say which kind of it: "raise
// the open files limit of the service" and "raise its memory limit",
// "run the tests in parallel" and "run them serially". A qualifier belongs
// to a category; when both goals name one of the same category, they must
// name the same one. A goal that names none is compatible with all.
//
// Each category holds the kinds its source lists:
//
//   - resources: the limits of getrlimit(2) and of systemd's
//     systemd.exec(5) and systemd.resource-control(5) (RLIMIT_NOFILE and
//     LimitNOFILE= for open files, RLIMIT_AS and MemoryMax= for memory,
//     RLIMIT_CPU and CPUQuota= for processor time, RLIMIT_FSIZE and the
//     disk quotas), and the connections of a server (PostgreSQL's
//     max_connections, nginx's worker_connections);
//   - execution: serial or parallel (pytest-xdist's "distributed and
//     parallel" against pytest's default serial run), synchronous or
//     asynchronous (the two kinds of call of most client libraries);
//   - extent: incremental or full, as backup tools name their kinds
//     (rsync's and restic's incremental copies, PostgreSQL's full base
//     backups);
//   - the task of a model, as the Hugging Face pipelines name them:
//     text classification (sentiment analysis), token classification
//     (named entity recognition), summarization, question answering,
//     object detection, image segmentation;
//   - the data a model reads, as the Hugging Face Hub groups its tasks:
//     natural language processing, computer vision (images), audio
//     (speech), video.
//
// A goal's qualifier of a category is the first one it names: "run the
// tests serially because the parallel workers share one database" runs
// them serially.

// Qualifier categories, each a mask of its kinds' bits.
const (
	qualResource  uint32 = 0xff       // memory, CPU, open files, disk, connections
	qualExecution uint32 = 0x3 << 8   // serial, parallel
	qualCall      uint32 = 0x3 << 10  // synchronous, asynchronous
	qualExtent    uint32 = 0x3 << 12  // incremental, full
	qualModelTask uint32 = 0x3f << 14 // what a model is trained for
	qualModality  uint32 = 0xf << 20  // what data a model reads
	qualCats             = 6          // categories above
)

var qualCategories = [qualCats]uint32{qualResource, qualExecution, qualCall, qualExtent, qualModelTask, qualModality}

// qualWords name a qualifier, as written (see qualPhrases for phrases).
var qualWords = map[string]uint32{
	// Resources.
	"memory": 1, "ram": 1, "rss": 1, "heap": 1, "memorymax": 1, "oom": 1,
	"cpu": 2, "cpus": 2, "cpuquota": 2,
	"nofile": 4, "ulimit": 4, "limitnofile": 4, "descriptors": 4,
	"disk": 8, "disks": 8, "inode": 8, "inodes": 8,
	"connections": 16, "connection": 16, "max_connections": 16,
	"bandwidth": 32,
	// Execution.
	"serial": 1 << 8, "serially": 1 << 8, "sequential": 1 << 8, "sequentially": 1 << 8,
	"parallel": 2 << 8, "parallelize": 2 << 8, "parallelise": 2 << 8, "parallelized": 2 << 8,
	"xdist": 2 << 8,
	// Calls.
	"synchronous": 1 << 10, "synchronously": 1 << 10,
	"async": 2 << 10, "asynchronous": 2 << 10, "asynchronously": 2 << 10,
	// Extent.
	"incremental": 1 << 12, "incrementally": 1 << 12, "differential": 1 << 12,
	"full": 2 << 12,
	// Tasks of a model.
	"sentiment": 1 << 14, "ner": 2 << 14, "summarization": 4 << 14, "summarize": 4 << 14,
	"qa": 8 << 14, "detection": 16 << 14, "segmentation": 32 << 14,
	// What data a model reads.
	"nlp": 1 << 20, "vision": 2 << 20, "image": 2 << 20, "images": 2 << 20,
	"audio": 4 << 20, "speech": 4 << 20, "video": 8 << 20, "videos": 8 << 20,
}

// qualPhrases are the qualifiers of vocabPhrases' terms, by canonical
// term: "open files limit" names open files.
var qualPhrases = map[string]uint32{}

func init() {
	for _, w := range []string{"nofile", "ner", "qa"} {
		qualPhrases[canonical(w)] = qualWords[w]
	}
}

// addQual adds the qualifier that a word as written (or a phrase's term)
// names to quals, unless quals already holds one of its category. Words
// count as written: "serially" is no "serialize".
func addQual(quals uint32, text string, phrase bool) uint32 {
	q, ok := qualWords[text]
	if phrase {
		q, ok = qualPhrases[text]
	}
	if !ok {
		return quals
	}
	for _, c := range qualCategories {
		if q&c != 0 {
			if quals&c != 0 {
				return quals
			}
			return quals | q
		}
	}
	return quals
}

// qualsFit reports whether two goals' qualifiers agree: in every category
// both name, the same kind.
func qualsFit(a, b uint32) bool {
	for _, c := range qualCategories {
		if a&c != 0 && b&c != 0 && a&b&c == 0 {
			return false
		}
	}
	return true
}
