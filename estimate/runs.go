package estimate

// scalarRun reads, from w.i, the run of elements of a turns array that are
// not objects (strings, numbers, true, false, null, and without ids
// arrays), each with the ',' before it unless first, as the loop of turns
// reads them one by one (counting the text of strings, and with ids a
// token a number), and returns how many it read. It calls nothing for a
// number, and only str for a string, whose calibrated counts are weighed
// maxTextSpans at a time: a body of short ones costs a few times less than
// an element at a time. (With ids, an array is a list of token ids: the
// loop of turns reads it.)
func (w *walker) scalarRun(first, ids bool) (n int) {
	s := w.s
	w.spans.n, w.spans.escaped = 0, 0
	for !w.bad {
		j := w.i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if !first {
			if j >= len(s) || s[j] != ',' {
				break
			}
			for j++; j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'); j++ {
			}
		}
		if j >= len(s) {
			break
		}
		if c := s[j]; c == '"' {
			w.i = j
			raw, decoded := w.str()
			if w.bad {
				break
			}
			w.text += decoded
			if w.weigh {
				k := w.spans.n
				w.spans.at[k] = [2]int64{int64(j + 1), int64(j + 1 + len(raw))}
				if decoded != int64(len(raw)) {
					w.spans.escaped |= 1 << k
				}
				if w.spans.n++; w.spans.n == maxTextSpans {
					w.units += spansUnits(s, &w.spans)
					w.spans.n, w.spans.escaped = 0, 0
					w.steps++
				}
			}
		} else if c == '-' || c >= '0' && c <= '9' {
			end, k := numberRun(s, j)
			if k == 0 {
				break // not a number: the walker says what it is
			}
			if ids {
				w.tokenIDs += int64(k)
			}
			w.i, w.steps, n = end, w.steps+int64(k), n+k-1
		} else if c == '[' && !ids || c == 't' || c == 'f' || c == 'n' {
			w.i = j
			w.skip() // counts nothing
		} else {
			break
		}
		n, first = n+1, false
	}
	if w.weigh && w.spans.n > 0 {
		w.units += spansUnits(s, &w.spans)
		w.steps++
	}
	w.spans.n = 0
	w.steps++
	return n
}

// numberRun reads the run of numbers of an array from the one at s[i], the
// others each after a ',' (blank space aside), and returns the index right
// after the last one read, and how many it read.
func numberRun(s string, i int) (end, n int) {
	for end = i; ; {
		j := end
		if n > 0 {
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			if j >= len(s) || s[j] != ',' {
				return end, n
			}
			for j++; j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'); j++ {
			}
		}
		k := j
		if k < len(s) && s[k] == '-' {
			k++
		}
		switch {
		case k < len(s) && s[k] == '0':
			k++
		case k < len(s) && s[k] >= '1' && s[k] <= '9':
			for k++; k < len(s) && s[k] >= '0' && s[k] <= '9'; k++ {
			}
		default:
			return end, n
		}
		if k < len(s) && (s[k] == '.' || s[k] == 'e' || s[k] == 'E') {
			if k = skipNumber(s, j); k < 0 { // a fraction or an exponent: rare
				return end, n
			}
		}
		end, n = k, n+1
	}
}

// tokenIDList reads an array in a list of prompts, counting its numbers:
// the token ids of one prompt of a batch.
func (w *walker) tokenIDList() {
	if !w.enter() {
		return
	}
	for first := true; w.elem(first); first = false {
		v := w.i
		if c := w.peek(); c == '-' || c >= '0' && c <= '9' {
			end, n := numberRun(w.s, w.i) // the run of ids from here, in one call
			if n == 0 {
				w.bad = true
				return
			}
			w.i, w.tokenIDs, w.steps = end, w.tokenIDs+int64(n), w.steps+int64(n)
		}
		w.done(v)
	}
}
