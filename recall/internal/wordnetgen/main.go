// Command wordnetgen writes recall's table of WordNet equivalences
// (recall/wordnet_table.go) from the WordNet 3.0 database, so that the
// build and the tests need no WordNet.
//
// Usage, from the module's root, with WordNet 3.0 installed (Debian's and
// Ubuntu's wordnet-base puts it under /usr/share/wordnet):
//
//	go run ./recall/internal/wordnetgen -dict /usr/share/wordnet -out recall/wordnet_table.go
//
// The output depends only on the database and the flags; recall's tests
// check the table the repository holds, not WordNet.
//
// # What it keeps
//
// Nouns and verbs, single words of at least three letters, and of each
// word one sense: the sense WordNet files under computer science (a
// domain pointer to {computer_science, computing}) when it has one, else
// its most frequent sense, the one counted most often in WordNet's
// semantic concordance (cntlist.rev), nouns and verbs together, the
// earlier sense on a tie. A word whose chosen sense is counted fewer than
// -min times (and is no computing sense) is left out.
//
// It writes two kinds of groups of words:
//   - the words whose chosen senses are one synset ("achieve" and
//     "attain", "cursor" and "pointer"; not "halt" and "stop": halt's
//     commonest sense is to cause something to stop, stop's to come to a
//     halt), the most counted word first;
//   - a verb and a noun that WordNet says are derivationally related,
//     each in its chosen sense ("pay" and "payment"), the verb first; not
//     a noun of a person (noun.person: "payer", "payee"), which names who
//     does or undergoes the action, not the action.
//
// Groups are sorted by their words.
//
// # License
//
// WordNet 3.0 Copyright 2006 by Princeton University. All rights
// reserved. It is used under the WordNet 3.0 license (permission to use,
// copy, modify and distribute it for any purpose and without fee, with
// its copyright notice and statements); docs/guard-and-recall.md cites it.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	dict := flag.String("dict", "/usr/share/wordnet", "the WordNet 3.0 dict directory")
	out := flag.String("out", "recall/wordnet_table.go", "the Go file to write")
	minCount := flag.Int("min", defaultMin, "the least count of a most frequent sense kept")
	flag.Parse()
	if err := run(*dict, *out, *minCount); err != nil {
		fmt.Fprintln(os.Stderr, "wordnetgen:", err)
		os.Exit(1)
	}
}

// member is one word of a synset.
type member struct {
	word  string
	lexID int
}

type synset struct {
	pos     byte // 'n' or 'v'
	offset  string
	lexFile int
	members []member
	derived []derivation
	// computing is set when WordNet files the synset under computer
	// science (a ";c" pointer to computerScience).
	computing bool
}

// defaultMin is the least count of a most frequent sense the committed
// table was made with.
const defaultMin = 1

// nounPerson is the lexicographer file of nouns of people.
const nounPerson = 18

// computerScience is the noun synset {computer_science, computing}.
const computerScience = "06128570"

// derivation is a "derivationally related form" pointer: word from of
// this synset and word to of synset key.
type derivation struct {
	from int
	key  string
	to   int
}

// sense is one sense of a word: its synset, its rank among the word's
// senses of its part of speech, and its count in the concordance.
type sense struct {
	key       string // pos and offset
	computing bool
	rank      int
	count     int
}

func run(dict, out string, minCount int) error {
	groups, err := build(dict, minCount)
	if err != nil {
		return err
	}
	src, err := render(groups, minCount)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// build reads the database in dict and returns the groups, sorted.
func build(dict string, minCount int) ([][]string, error) {
	counts, err := readCounts(filepath.Join(dict, "cntlist.rev"))
	if err != nil {
		return nil, err
	}
	synsets := map[string]*synset{}
	senses := map[string][]sense{}
	for _, pos := range []struct {
		name string
		ss   byte
		num  int
	}{{"noun", 'n', 1}, {"verb", 'v', 2}} {
		if err := readData(filepath.Join(dict, "data."+pos.name), pos.ss, synsets); err != nil {
			return nil, err
		}
		if err := readIndex(filepath.Join(dict, "index."+pos.name), pos.ss, pos.num, synsets, counts, senses); err != nil {
			return nil, err
		}
	}
	// Each word's chosen sense.
	type kept struct {
		word  string
		count int
	}
	chosen := map[string]string{}
	bySynset := map[string][]kept{}
	for w, ss := range senses {
		if !plainWord(w) {
			continue
		}
		best := ss[0]
		for _, s := range ss[1:] {
			switch {
			case s.computing != best.computing:
				if s.computing {
					best = s
				}
			case s.count > best.count, s.count == best.count && s.rank < best.rank:
				best = s
			}
		}
		if best.count < minCount && !best.computing {
			continue
		}
		chosen[w] = best.key
		bySynset[best.key] = append(bySynset[best.key], kept{w, best.count})
	}
	var groups [][]string
	for _, ks := range bySynset {
		if len(ks) < 2 {
			continue
		}
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].count != ks[j].count {
				return ks[i].count > ks[j].count
			}
			return ks[i].word < ks[j].word
		})
		g := make([]string, len(ks))
		for i, k := range ks {
			g[i] = k.word
		}
		groups = append(groups, g)
	}
	// A verb and a noun derived one from the other, each in its chosen
	// sense ("pay" and "payment").
	seen := map[[2]string]bool{}
	for key, s := range synsets {
		if s.pos != 'n' {
			continue
		}
		for _, d := range s.derived {
			n, v := s.members[d.from].word, synsets[d.key].members[d.to].word
			pair := [2]string{v, n}
			if chosen[n] != key || chosen[v] != d.key || s.lexFile == nounPerson || seen[pair] {
				continue
			}
			seen[pair] = true
			groups = append(groups, pair[:])
		}
	}
	sort.Slice(groups, func(i, j int) bool { return slices.Compare(groups[i], groups[j]) < 0 })
	return groups, nil
}

// plainWord reports whether w is one word of at least three lowercase
// letters.
func plainWord(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// readCounts reads cntlist.rev: "sense_key sense_number tag_cnt".
func readCounts(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		n, err := strconv.Atoi(fs[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		counts[fs[0]] = n
	}
	return counts, sc.Err()
}

// readData reads the synsets of a data file: "offset lex_filenum ss_type
// w_cnt word lex_id ...".
func readData(path string, pos byte, synsets map[string]*synset) error {
	return eachRecord(path, func(fs []string) error {
		if len(fs) < 4 {
			return fmt.Errorf("%s: short line %q", path, fs[0])
		}
		lexFile, err := strconv.Atoi(fs[1])
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, fs[0], err)
		}
		n, err := strconv.ParseInt(fs[3], 16, 32)
		if err != nil || len(fs) < 4+2*int(n) {
			return fmt.Errorf("%s: %s: bad word count", path, fs[0])
		}
		s := &synset{pos: pos, offset: fs[0], lexFile: lexFile}
		for i := 0; i < int(n); i++ {
			id, err := strconv.ParseInt(fs[5+2*i], 16, 32)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", path, fs[0], err)
			}
			s.members = append(s.members, member{word: strings.ToLower(fs[4+2*i]), lexID: int(id)})
		}
		rest := fs[4+2*int(n):]
		np, err := strconv.Atoi(rest[0])
		if err != nil || len(rest) < 1+4*np {
			return fmt.Errorf("%s: %s: bad pointer count", path, fs[0])
		}
		for i := 0; i < np; i++ {
			p := rest[1+4*i : 5+4*i]
			if p[0] == ";c" && p[1] == computerScience && p[2] == "n" {
				s.computing = true
			}
			if p[0] != "+" || p[2] != "n" && p[2] != "v" || string(p[2][0]) == string(pos) {
				continue
			}
			from, err1 := strconv.ParseInt(p[3][:2], 16, 32)
			to, err2 := strconv.ParseInt(p[3][2:], 16, 32)
			if err1 != nil || err2 != nil || from == 0 || to == 0 {
				continue
			}
			s.derived = append(s.derived, derivation{int(from) - 1, p[2] + p[1], int(to) - 1})
		}
		synsets[string(pos)+fs[0]] = s
		return nil
	})
}

// readIndex reads an index file: "lemma pos synset_cnt p_cnt [ptr...]
// sense_cnt tagsense_cnt offset...", the offsets in WordNet's sense order,
// and gives each sense its count in the concordance.
func readIndex(path string, pos byte, num int, synsets map[string]*synset, counts map[string]int, senses map[string][]sense) error {
	return eachRecord(path, func(fs []string) error {
		if len(fs) < 6 {
			return fmt.Errorf("%s: short line %q", path, fs[0])
		}
		lemma := fs[0]
		nSyn, err1 := strconv.Atoi(fs[2])
		nPtr, err2 := strconv.Atoi(fs[3])
		if err1 != nil || err2 != nil || len(fs) != 4+nPtr+2+nSyn {
			return fmt.Errorf("%s: %s: bad counts", path, lemma)
		}
		for rank, off := range fs[4+nPtr+2:] {
			key := string(pos) + off
			s, ok := synsets[key]
			if !ok {
				return fmt.Errorf("%s: %s: no synset %s", path, lemma, off)
			}
			lexID := -1
			for _, m := range s.members {
				if m.word == lemma {
					lexID = m.lexID
				}
			}
			if lexID < 0 {
				return fmt.Errorf("%s: %s: not in synset %s", path, lemma, off)
			}
			sk := fmt.Sprintf("%s%%%d:%02d:%02d::", lemma, num, s.lexFile, lexID)
			senses[lemma] = append(senses[lemma], sense{key: key, computing: s.computing, rank: rank, count: counts[sk]})
		}
		return nil
	})
}

// eachRecord calls f with the fields of each line of a WordNet data or
// index file past its license header (lines that open with a space).
func eachRecord(path string, f func(fs []string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == ' ' {
			continue
		}
		if err := f(strings.Fields(string(line))); err != nil {
			return err
		}
	}
	return sc.Err()
}

// render returns the Go source of the table.
func render(groups [][]string, minCount int) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./recall/internal/wordnetgen; DO NOT EDIT.\n\n")
	b.WriteString("package recall\n\n")
	b.WriteString(license)
	b.WriteString("// wordnetGroups are groups of WordNet 3.0 nouns and verbs of one sense:\n")
	b.WriteString("// words of one synset, or a verb and the noun derived from it, each in\n")
	fmt.Fprintf(&b, "// its sense under computer science or its most frequent (of a tag count of\n// at least %d); see recall/internal/wordnetgen and wordnet.go.\n", minCount)
	b.WriteString("var wordnetGroups = [][]string{\n")
	for _, g := range groups {
		b.WriteString("\t{")
		for i, w := range g {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(w))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// license is WordNet's license, which asks that its copyright notice and
// statements appear on every copy of the database: the table is one.
const license = `// The words of this table come from WordNet 3.0, under its license:
//
// WordNet Release 3.0 This software and database is being provided to you,
// the LICENSEE, by Princeton University under the following license. By
// obtaining, using and/or copying this software and database, you agree
// that you have read, understood, and will comply with these terms and
// conditions.: Permission to use, copy, modify and distribute this
// software and database and its documentation for any purpose and without
// fee or royalty is hereby granted, provided that you agree to comply with
// the following copyright notice and statements, including the disclaimer,
// and that the same appear on ALL copies of the software, database and
// documentation, including modifications that you make for internal use
// or for distribution. WordNet 3.0 Copyright 2006 by Princeton University.
// All rights reserved. THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND
// PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR
// IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY
// MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANT- ABILITY OR FITNESS
// FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED SOFTWARE,
// DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS,
// COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS. The name of Princeton University
// or Princeton may not be used in advertising or publicity pertaining to
// distribution of the software and/or database. Title to copyright in
// this software, database and any associated documentation shall at all
// times remain with Princeton University and LICENSEE agrees to preserve
// same.

`
