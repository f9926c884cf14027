package recall

import "strings"

// British and American spellings. A task written in British English
// ("normalise the colours", "visualise the catalogue") is the same task as
// one written in American English, and the stemmer does not bring the two
// together: "normalise" stems to "normalis", "normalize" to "normal". Each
// British form is read as its American form before it is stemmed, on both
// sides of the comparison.
//
// Source: the classes of spelling differences that VarCon (Kevin
// Atkinson's Variant Conversion Info, the table behind the SCOWL spelling
// dictionaries) and the Oxford and Merriam-Webster dictionaries record:
// -ise for -ize and -yse for -yze (with their inflections and the -isation
// nouns), -our for -or, -re for -er, -ogue for -og, -ence for -ense, and a
// few single words (grey, programme, judgement). The lists hold the words
// of software work; words that end the same way without being variants
// ("promise", "exercise", "enterprise", "noise", "analysis") are never
// listed. Doubled consonants (cancelled, modelling, labelled) need no
// entry: the stemmer folds them already.

// britishRoots are the British roots whose endings vary by inflection:
// root+suffix is read as american+suffix for every suffix of its class.
var britishRoots = []struct {
	suffixes []string
	roots    []string
	american func(root string) string
}{
	{ // -ise, -ised, -ising, -isation...: -ize
		[]string{"e", "ed", "es", "ing", "er", "ers", "ation", "ations", "able"},
		[]string{
			"anonymis", "authoris", "capitalis", "categoris", "centralis",
			"characteris", "containeris", "customis", "deserialis", "digitalis",
			"dockeris", "finalis", "generalis", "initialis", "internationalis",
			"itemis", "localis", "materialis", "maximis", "memois", "minimis",
			"modernis", "monetis", "normalis", "optimis", "organis", "parallelis",
			"parametris", "personalis", "prioritis", "randomis", "realis",
			"recognis", "sanitis", "serialis", "specialis", "stabilis",
			"standardis", "summaris", "synchronis", "templatis", "tokenis",
			"uncategoris", "unauthoris", "utilis", "virtualis", "visualis",
			"vectoris", "emphasis", "apologis", "criticis", "harmonis",
			"legalis", "mobilis", "neutralis", "penalis", "rationalis",
		},
		func(root string) string { return root[:len(root)-1] + "z" },
	},
	{ // -yse, -ysed, -ysing: -yze
		[]string{"e", "ed", "es", "ing", "er", "ers"},
		[]string{"analys", "catalys", "paralys"},
		func(root string) string { return root[:len(root)-1] + "z" },
	},
	{ // -our: -or
		[]string{"", "s", "ed", "ing", "al", "ally", "ful", "less", "ite", "ites", "able"},
		[]string{"armour", "behaviour", "colour", "favour", "flavour", "harbour", "honour", "humour", "labour", "neighbour", "rumour", "vapour"},
		func(root string) string { return root[:len(root)-2] + "r" },
	},
}

// britishWords are single British words and their American forms.
var britishWords = map[string]string{
	"centre": "center", "centres": "centers", "centred": "centered", "centring": "centering",
	"metre": "meter", "metres": "meters", "litre": "liter", "litres": "liters",
	"fibre": "fiber", "fibres": "fibers", "theatre": "theater", "calibre": "caliber",
	"catalogue": "catalog", "catalogues": "catalogs", "catalogued": "cataloged",
	"dialogue": "dialog", "dialogues": "dialogs", "analogue": "analog",
	"licence": "license", "licences": "licenses", "defence": "defense",
	"offence": "offense", "pretence": "pretense",
	"grey": "gray", "greyed": "grayed", "greys": "grays", "greyscale": "grayscale",
	"programme": "program", "programmes": "programs",
	"judgement": "judgment", "acknowledgement": "acknowledgment",
	"enrol": "enroll", "enrols": "enrolls", "enrolment": "enrollment",
	"fulfil": "fulfill", "fulfils": "fulfills", "fulfilment": "fulfillment",
	"instalment": "installment", "artefact": "artifact", "artefacts": "artifacts",
	"ageing": "aging",
}

// americanForms maps each British form of britishRoots and britishWords to
// its American form; filled once by init.
var americanForms = func() map[string]string {
	m := make(map[string]string, len(britishWords)+512)
	for b, a := range britishWords {
		m[b] = a
	}
	for _, class := range britishRoots {
		for _, r := range class.roots {
			am := class.american(r)
			for _, s := range class.suffixes {
				if s == "" && strings.HasSuffix(r, "is") {
					continue // "normalis" is no word
				}
				m[r+s] = am + s
			}
		}
	}
	return m
}()

// americanSpelling returns the American form of a lowercase word, or the
// word itself.
func americanSpelling(w string) string {
	if a, ok := americanForms[w]; ok {
		return a
	}
	return w
}
